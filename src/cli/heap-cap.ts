import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import type { Environment } from '../config/environment';
import { CliError, ExitCode } from './exit';

/**
 * `fanout worker` runs with a capped V8 heap. Node sizes the old space from the machine (about 4.3 GB here), and V8
 * collects lazily below that: a long batch grew a worker to 0.85-1.9 GB RSS of mostly garbage, where a 160 MB cap kept
 * the same run near 450 MB. The limit cannot be lowered once V8 has started (`v8.setFlagsFromString` is too late), so
 * the worker re-launches itself with `--max-old-space-size` and the first process only supervises.
 */
export const DEFAULT_WORKER_HEAP_MB = 256;
const MIN_WORKER_HEAP_MB = 64;
const HEAP_VARIABLE = 'FANOUT_WORKER_HEAP_MB';
/**
 * How far past what a full collection left live the capped heap may grow before the next one, in percent. V8 grows a heap
 * capped this small by a factor of about 1.3 only (the factor it keeps for memory-constrained devices), so a worker with
 * hundreds of calls in flight ran a full collection every few hundred calls: a fifth more CPU per call than uncapped
 * (bench/worker-cpu.ts --variant). Doubling keeps the cap and halves those collections, for some 30-50 MB more RSS.
 */
const CAPPED_HEAP_GROWING_PERCENT = 100;
/**
 * The young generation's semi-space of the child's threads (the worker's and the workflow threads': V8 flags are the
 * process's), in MB. Node lets it grow to 16 MB, and a worker reaches that in its first seconds: 32 MB of new space per
 * thread. With 500 calls of 3 s in flight most of what a call allocates outlives a scavenge either way: 8 MB costs no CPU
 * per call measured (bench/worker-memory.ts, side by side with the build before: 4.62 and 4.11 ms against 4.52 and 4.08 in
 * compare.ts's 4,000 x 3 s batch) for 10-20 MB less peak RSS; 4 MB saved 10-20 MB more but cost 5-10% CPU per call there.
 */
const CAPPED_SEMI_SPACE_MB = 8;
/**
 * The workflow threads' semi-space, in MB, where the worker's own thread has CAPPED_SEMI_SPACE_MB: V8 reads the flag
 * when an isolate is made, like the heap cap (capWorkflowThreads). A workflow thread allocates a small part of what the
 * worker's thread does (activations, not calls), so a smaller young generation there costs no CPU per call measured
 * (bench/worker-memory.ts) and saves most of its 16 MB of new space.
 */
const WORKFLOW_THREAD_SEMI_SPACE_MB = 2;
/** A young generation size the user chose (node arguments or NODE_OPTIONS): then theirs holds. */
const SEMI_SPACE_FLAG = /(^|\s)--(max|min)[-_]semi[-_]space[-_]size/;
/**
 * glibc's allocator as the child starts with it, unless the environment sets these itself. By default it gives every
 * thread that allocates an arena of its own (up to 8 per core: the SDK's Rust core, V8's and libuv's helper threads)
 * and raises the size from which it maps a block of its own as large blocks come and go, so what a busy worker's threads
 * freed stayed in arenas it did not return: arenas held 100-120 MB of a 430-510 MB worker (/proc/PID/smaps). A fixed
 * threshold (which also stops that raising) cut most of that, 70-100 MB of peak RSS with two arenas for the same CPU
 * per call in batches (bench/worker-memory.ts). At most 16 arenas, not 2: with two, the threads waited on each other's
 * arena and 200 agents took 4-16% more worker CPU (four alternated pairs, docs/BENCHMARKS.md), while batches' peak RSS
 * moved within the runs' spread (-4 to +10 MB). The threshold is 1 MB, not glibc's starting 128 KB: at 128 KB the worker
 * handed memory back to the system after nearly every large free and took it back soon after, and 200 agents ran 6-9%
 * longer (three alternated pairs; worker CPU within 1%), while batches' peak RSS and CPU per call stayed within the
 * rounds' spread (docs/BENCHMARKS.md). A fixed threshold also keeps glibc's mmap threshold at 128 KB, so every block
 * above it is mapped and unmapped per use: zlib's buffers for a gzip-compressed connection to Temporal were 30% of the
 * Rust threads' samples, in page faults (why a connection to a local server is not compressed:
 * grpcCompressionFromEnvironment in src/config/environment.ts). musl and other allocators ignore the variables.
 */
const CAPPED_MALLOC_ENVIRONMENT: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '16',
  MALLOC_TRIM_THRESHOLD_: '1048576',
};
/**
 * Heap the workflow thread needs per workflow of the worker's cache, in MB (the SDK runs every cached workflow in one
 * thread, reusing its V8 context). Live heap after full collections, 300 agents cached at their first step: 86 KB an
 * agent (the SDK's stacks of its pending promises, its own instances of 30 small modules, its state and handlers),
 * growing by a few KB a step; a fan-out about 1 MB (it loads zod). 1 MB each is room for any mix of the two, for long
 * agents, and for the heap to double before a collection (the child's growing percent): a ceiling, not what the thread
 * takes. A thread out of memory ends the worker: 1,400 agents ran a thread out of a 256 MB cap when a cached agent held
 * 1-2 MB (its own zod and schemas, since gone).
 */
const WORKFLOW_THREAD_MB_PER_CACHED_WORKFLOW = 1;
/** Set in the re-launched child's environment: it is the worker, never a launcher again. */
const CAPPED_MARKER = 'FANOUT_HEAP_CAPPED';
/**
 * Set in the child's environment when the launcher sized its young generation (CAPPED_SEMI_SPACE_MB), not the user: only
 * then do the workflow threads get WORKFLOW_THREAD_SEMI_SPACE_MB. A user's flag of the same value stays the user's.
 */
const SEMI_SPACE_MARKER = 'FANOUT_HEAP_SEMI_SPACE';
/** The signals the supervising parent passes on: the SDK's shutdown signals, and SIGHUP for a closed terminal. */
const FORWARDED_SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR2'];
/** A heap limit the user chose: old space in MB or as a percentage of memory, or the whole heap. */
const HEAP_LIMIT_FLAG = /(^|\s)--max[-_](old[-_]space|heap)[-_]size/;

/**
 * The heap cap in MB this process should re-launch with, or undefined to run the worker here: FANOUT_WORKER_HEAP_MB
 * is `off`, the user set a heap limit (node arguments or NODE_OPTIONS), or this is the re-launched child already.
 * Pure, so src/cli/main.ts can ask before it installs the runtime. Throws (exit code 2) on a bad FANOUT_WORKER_HEAP_MB.
 */
export function heapCapToApply(
  environment: Environment = process.env,
  execArgv: readonly string[] = process.execArgv,
): number | undefined {
  const raw = environment[HEAP_VARIABLE]?.trim() ?? '';
  let megabytes = DEFAULT_WORKER_HEAP_MB;
  if (raw.toLowerCase() === 'off') return undefined;
  if (raw !== '') {
    megabytes = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (!(megabytes >= MIN_WORKER_HEAP_MB)) {
      throw new CliError(
        `${HEAP_VARIABLE} must be a whole number of MB, at least ${MIN_WORKER_HEAP_MB}, or "off"; got "${raw}"`,
        ExitCode.badInput,
      );
    }
  }
  if (environment[CAPPED_MARKER] === '1') return undefined;
  if (
    execArgv.some((argument) => HEAP_LIMIT_FLAG.test(argument)) ||
    HEAP_LIMIT_FLAG.test(environment.NODE_OPTIONS ?? '')
  )
    return undefined;
  return megabytes;
}

/**
 * In the re-launched child, before the worker starts its workflow threads: gives their heaps room for
 * `cachedWorkflows` (half the cap plus WORKFLOW_THREAD_MB_PER_CACHED_WORKFLOW each, at least the cap). V8 reads
 * --max-old-space-size when an isolate is made, so the threads made after this get it while this thread keeps its
 * cap. Returns the threads' cap in MB, or undefined where nothing was capped.
 */
export function capWorkflowThreads(
  cachedWorkflows: number,
  environment: Environment = process.env,
  execArgv: readonly string[] = process.execArgv,
): number | undefined {
  if (environment[CAPPED_MARKER] !== '1') return undefined;
  const cap = Number(/--max-old-space-size=(\d+)/.exec(execArgv.join(' '))?.[1]);
  if (!(cap > 0)) return undefined;
  const threads = Math.max(cap, Math.ceil(cap / 2 + cachedWorkflows * WORKFLOW_THREAD_MB_PER_CACHED_WORKFLOW));
  setFlagsFromString(`--max-old-space-size=${threads}`);
  // Only where the young generation's size is the launcher's (semiSpaceArguments), not one the user chose.
  if (environment[SEMI_SPACE_MARKER] === '1')
    setFlagsFromString(`--max-semi-space-size=${WORKFLOW_THREAD_SEMI_SPACE_MB}`);
  return threads;
}

/** The child's semi-space flag, or none where the user set the young generation's size. */
export function semiSpaceArguments(environment: Environment, execArgv: readonly string[]): string[] {
  const chosen =
    execArgv.some((argument) => SEMI_SPACE_FLAG.test(argument)) || SEMI_SPACE_FLAG.test(environment.NODE_OPTIONS ?? '');
  return chosen ? [] : [`--max-semi-space-size=${CAPPED_SEMI_SPACE_MB}`];
}

/**
 * Re-launches this command in a child with the heap cap and supervises it, or returns false to run here. On true the
 * child has exited and this process has taken its exit code (or is being ended by the child's signal); the caller
 * does nothing more. In the child it ties the child's life to the parent's first. `killAfterSignalMs`: a child still
 * running this long after a forwarded signal is SIGKILLed (it bounds the child's own shutdown, should that hang).
 */
export async function relaunchWithHeapCap(options: { killAfterSignalMs?: number } = {}): Promise<boolean> {
  if (process.env[CAPPED_MARKER] === '1' && process.send !== undefined) {
    dieWithParent();
    // Read at each collection, so setting it now works; a V8 without the flag says so on stderr and runs on.
    setFlagsFromString(`--heap-growing-percent=${CAPPED_HEAP_GROWING_PERCENT}`);
  }
  const megabytes = heapCapToApply();
  if (megabytes === undefined) return false;

  const semiSpace = semiSpaceArguments(process.env, process.execArgv);
  const child = spawn(
    process.execPath,
    [...process.execArgv, `--max-old-space-size=${megabytes}`, ...semiSpace, ...process.argv.slice(1)],
    {
      env: {
        ...CAPPED_MALLOC_ENVIRONMENT,
        ...process.env,
        [CAPPED_MARKER]: '1',
        // Never inherited: a user's own flag of the same value is theirs.
        [SEMI_SPACE_MARKER]: semiSpace.length > 0 ? '1' : '',
      },
      // The IPC channel is only there so the child notices when this process is gone, however it went.
      stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
      // Its own process group: Ctrl-C in a terminal signals the whole foreground group, and the child would get SIGINT
      // twice (directly and forwarded). The SDK drops its handler after the first, so the second would kill it mid-drain.
      detached: true,
    },
  );
  // Every signal goes to the child, which shuts down as a single-process worker would; this process waits for it, for
  // at most `killAfterSignalMs`.
  let killTimer: NodeJS.Timeout | undefined;
  const forward = (signal: NodeJS.Signals) => {
    child.kill(signal);
    if (killTimer === undefined && options.killAfterSignalMs !== undefined) {
      killTimer = setTimeout(() => {
        process.stderr.write(`worker still running ${options.killAfterSignalMs} ms after ${signal}; killing it\n`);
        child.kill('SIGKILL');
      }, options.killAfterSignalMs);
    }
  };
  for (const signal of FORWARDED_SIGNALS) process.on(signal, forward);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
  }).finally(() => {
    clearTimeout(killTimer);
    for (const name of FORWARDED_SIGNALS) process.removeListener(name, forward);
  });
  if (signal === null) {
    process.exitCode = code ?? ExitCode.error;
  } else {
    // End the same way, so a supervisor sees the signal; the shell's 128 + n should this one not be fatal here.
    process.exitCode = 128 + (constants.signals[signal] ?? 0);
    process.kill(process.pid, signal);
  }
  return true;
}

/**
 * In the re-launched child: the IPC channel must not keep it alive, and when the parent is gone (the channel
 * disconnects, even after a SIGKILL the parent could not forward) the child ends at once like the crash that was.
 */
function dieWithParent(): void {
  process.channel?.unref();
  process.once('disconnect', () => process.kill(process.pid, 'SIGKILL'));
}

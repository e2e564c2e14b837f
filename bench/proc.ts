import { readdirSync, readFileSync } from 'node:fs';

/** Reading processes from /proc, for the benchmarks that weigh a worker's memory and CPU (Linux only). */

/** A process and its descendants (`fanout worker` re-launches itself with a heap cap: the worker is the child). */
export function processTree(pid: number): number[] {
  const tree = [pid];
  for (let index = 0; index < tree.length; index += 1) {
    try {
      for (const task of readdirSync(`/proc/${tree[index]}/task`)) {
        const children = readFileSync(`/proc/${tree[index]}/task/${task}/children`, 'utf8').trim();
        if (children) tree.push(...children.split(/\s+/).map(Number));
      }
    } catch {
      // gone meanwhile
    }
  }
  return tree;
}

/** A process's peak (VmHWM) or current (VmRSS) resident memory, in MB. */
export function statusMb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
}

/**
 * The pages only this process maps, in MB (Private_Clean + Private_Dirty of /proc/PID/smaps_rollup): what it adds to
 * the machine beside the processes it shares the rest with. `fanout worker`'s launcher shares most of its RSS (the node
 * binary's and its libraries' pages) with its child; 0 once it is gone.
 */
export function privateMb(pid: number): number {
  try {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(rollup)?.[1] ?? 0);
    return (kb('Private_Clean') + kb('Private_Dirty')) / 1024;
  } catch {
    return 0;
  }
}

/** User + system CPU seconds of a process so far (clock ticks of 1/100 s); 0 once it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** One thread's CPU so far: its process, its id, its name (`comm`: most of a Node process's threads are `node`). */
export interface ThreadCpu {
  pid: number;
  tid: number;
  comm: string;
  seconds: number;
}

/** User + system CPU seconds of every thread of one process so far (threads gone meanwhile are left out). */
export function processThreadCpu(pid: number): ThreadCpu[] {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  return tids.flatMap((tid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      return [{ pid, tid: Number(tid), comm, seconds: (Number(fields[11]) + Number(fields[12])) / 100 }];
    } catch {
      return []; // gone meanwhile
    }
  });
}

/** The same for every process of a process tree. */
export function threadCpuSeconds(pid: number): ThreadCpu[] {
  return processTree(pid).flatMap(processThreadCpu);
}

/**
 * The CPU each thread spent between two readings, by role where its name or place says it: `main` (the process's own
 * thread), `tokio` (the SDK core), and for the unnamed `node` threads their thread id, in order of creation (in a
 * worker: V8's platform threads first, GC helpers among them; then libuv's pool of four; the workflow thread last).
 */
export function threadCpuDelta(before: ThreadCpu[], after: ThreadCpu[]): string {
  const earlier = new Map(before.map((thread) => [thread.tid, thread.seconds]));
  return after
    .map((thread) => ({ ...thread, spent: thread.seconds - (earlier.get(thread.tid) ?? 0) }))
    .filter((thread) => thread.spent >= 0.05)
    .sort((a, b) => a.pid - b.pid || a.tid - b.tid)
    .map((thread) => {
      const role =
        thread.tid === thread.pid ? 'main' : thread.comm === 'node' ? `+${thread.tid - thread.pid}` : thread.comm;
      return `${role} ${thread.spent.toFixed(2)}`;
    })
    .join(', ');
}

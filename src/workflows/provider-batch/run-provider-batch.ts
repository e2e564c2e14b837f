import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  log,
  proxyActivities,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { PartCollected, ProviderBatchActivities } from '../../contract/provider-batch';
import type { ProviderBatchStatus } from '../../contract/provider-batch';
import { progressOf, usageOf, type PartState } from './progress';
import { inLanes } from '../../contract/in-lanes';
import { patched030 } from '../patches';
import type {
  ProviderBatchHooks,
  ProviderBatchInfo,
  ProviderBatchInput,
  ProviderBatchProgress,
  ProviderBatchResult,
} from './types';

const DAY_MS = 24 * 60 * 60 * 1000;

/** A new round of provider batches needs this many times the previous round's length left before the deadline. */
const RETRY_ROUND_MARGIN = 2;

function activities() {
  const retry = { initialInterval: 1000, backoffCoefficient: 2, maximumInterval: 60_000, maximumAttempts: 30 };
  // Uploads and downloads of up to a few hundred MB heartbeat; a lost worker is noticed by the heartbeat timeout.
  const long = proxyActivities<ProviderBatchActivities>({
    startToCloseTimeout: '1 hour',
    heartbeatTimeout: '20 seconds',
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry,
  });
  const short = proxyActivities<ProviderBatchActivities>({
    startToCloseTimeout: '2 minutes',
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    retry,
  });
  return { long, short };
}

/** A lane stopped for a hand-over: its part's state says where to go on from. */
const HANDED_OVER = 'handed-over' as const;

/**
 * Runs a batch through provider batch APIs: plans parts, submits them (idempotently), waits with durable timers, and
 * streams the results into segments. Cancelled, it cancels its provider batches, keeps what they answered, then rethrows.
 * Usable inline from another workflow (with hooks) or as the `providerBatch` workflow.
 */
export async function runProviderBatch(
  input: ProviderBatchInput,
  hooks: ProviderBatchHooks = {},
): Promise<ProviderBatchResult> {
  const options = input.options ?? {};
  const { long, short } = activities();
  const { carried } = input;
  const startedAt = carried?.startedAt ?? workflowInfo().startTime.getTime();
  const deadline = carried?.deadline ?? options.deadlineAtMs ?? startedAt + (options.deadlineMs ?? DAY_MS);
  // Provider batches made before this run began cannot be its parts; lookups stop there (an hour's slack for clocks).
  const notBefore = Math.floor(startedAt / 1000) - 3600;
  const pollMs = options.pollIntervalMs ?? 60_000;
  const maxPollMs = options.maxPollIntervalMs ?? 600_000;
  const history: ProviderBatchInfo[] = carried
    ? carried.providerBatches.map((info) => ({ ...info, counts: { ...info.counts } }))
    : [];
  const states: PartState[] = (carried?.parts ?? []).map((part) => ({
    ...part,
    info: history.find((info) => info.part === part.part.index && info.attempt === part.attempt && info.id === part.id),
  }));
  const runs = carried?.runs ?? 1;
  let polls = 0;
  let handingOver = false;
  /** True once this run should hand over; decided at a poll, so every lane stops at its next one. */
  const handOverDue = (): boolean => {
    if (handingOver || !hooks.handOver) return handingOver;
    if (polls < (options.maxPollsPerRun ?? 300) && !workflowInfo().continueAsNewSuggested) return false;
    handingOver = true;
    return true;
  };

  // 0.3.0: a part that fails stops the others (a submit still uploading is cancelled, not left to create a batch
  // nobody watches), and clean-up starts once every part has stopped; one part's clean-up failing skips no other; a part
  // the provider refuses fails alone.
  const settles = patched030();

  const progress = (): ProviderBatchProgress => progressOf(states, history);
  const changed = () => hooks.onProgress?.(progress());

  const planInput = {
    batchId: input.batchId,
    source: input.source,
    spool: input.spool,
    ...(input.skipIds === undefined ? {} : { skipIds: input.skipIds }),
    ...pick(options, ['provider', 'endpoint', 'model', 'maxRequestsPerPart', 'maxBytesPerPart', 'promptCache']),
  };
  if (!carried) {
    const { parts } = await long.planProviderBatch(planInput);
    for (const part of parts) states.push({ part, round: 0, attempt: 0 });
  }
  changed();

  const submitInput = (state: PartState) => ({
    batchId: input.batchId,
    spool: input.spool,
    part: state.part,
    attempt: state.attempt,
    notBefore,
  });

  // Anthropic's batches carry no metadata: a retried submit finds a batch its lost attempt created by its request count
  // among the batches no other part recorded, which is sound only while one Anthropic create at a time is unrecorded.
  let anthropicSubmits: Promise<unknown> = Promise.resolve();
  const submit = (state: PartState): Promise<{ id: string; reused: boolean }> => {
    if (state.part.provider !== 'anthropic') return long.submitProviderBatch(submitInput(state));
    const turn = anthropicSubmits.then(() => long.submitProviderBatch(submitInput(state)));
    anthropicSubmits = turn.catch(() => undefined);
    return turn;
  };

  /**
   * Polls until the batch ends, waiting on timers; past the deadline it is cancelled (what it answered is kept). With
   * `mayHandOver`, stops (returning HANDED_OVER) at the first poll after this run's hand-over was decided.
   */
  async function untilEnded(
    state: PartState,
    id: string,
    honourDeadline: boolean,
    mayHandOver = false,
  ): Promise<ProviderBatchStatus | typeof HANDED_OVER> {
    let wait = state.pollWaitMs ?? pollMs;
    for (;;) {
      if (mayHandOver && handOverDue()) {
        state.pollWaitMs = wait;
        return HANDED_OVER;
      }
      const status = await short.pollProviderBatch({ provider: state.part.provider, id });
      polls += 1;
      if (state.info) Object.assign(state.info, { status: status.providerStatus, counts: status.counts });
      changed();
      if (status.state !== 'running') return status;
      if (honourDeadline && !state.deadlineCancelled && Date.now() >= deadline) {
        await short.cancelProviderBatch({ provider: state.part.provider, id });
        state.deadlineCancelled = true;
      }
      const untilDeadline = deadline - Date.now();
      await sleep(
        honourDeadline && !state.deadlineCancelled && untilDeadline > 0 ? Math.min(wait, untilDeadline) : wait,
      );
      wait = Math.min(maxPollMs, Math.round(wait * 1.5));
    }
  }

  async function collect(
    state: PartState,
    id: string | undefined,
    refused?: { type: string; message: string },
  ): Promise<void> {
    state.collected = await long.collectProviderBatch({
      spool: input.spool,
      part: state.part,
      ...(id === undefined ? {} : { id }),
      ...(refused === undefined ? {} : { refused }),
      durationMs: Date.now() - (state.submittedAt ?? startedAt),
      ...(state.round === 0 ? {} : { round: state.round }),
    });
    state.endedAt = Date.now();
    changed();
  }

  async function runPart(state: PartState): Promise<void> {
    let backoff = pollMs;
    for (;;) {
      // A part an earlier run submitted goes on being polled; its submit is not asked again.
      let id = state.id;
      if (id === undefined) {
        if (handingOver) return;
        try {
          // Awaited as it is, with no promise between: Anthropic submits chain one after another, and a hop more here
          // would move this part's first poll after the next part's submit in the run's commands.
          ({ id } = await submit(state));
        } catch (error) {
          // 0.3.0: a part the provider refuses ends alone (its items failed, or sent sync); the others run on.
          const refused = settles ? refusalOf(error) : undefined;
          if (refused === undefined) throw error;
          return collect(state, undefined, options.refusedPartsSync ? undefined : refused);
        }
        state.id = id;
        state.submittedAt ??= Date.now();
        state.info = {
          provider: state.part.provider,
          id,
          status: 'submitted',
          counts: { total: state.part.count, succeeded: 0, failed: 0, processing: state.part.count },
          part: state.part.index,
          attempt: state.attempt,
        };
        history.push(state.info);
      }
      const status = await untilEnded(state, id, true, true);
      if (status === HANDED_OVER) return;
      if (status.state === 'ended') return collect(state, id);
      // Refused whole. Over the enqueued-token limit: wait for earlier batches to drain, then submit again.
      if (status.failure?.code === 'token_limit_exceeded' && Date.now() + backoff < deadline) {
        await sleep(backoff);
        backoff = Math.min(maxPollMs, Math.round(backoff * 1.5));
        state.attempt += 1;
        state.id = undefined;
        state.pollWaitMs = undefined;
        continue;
      }
      // Nothing of it ran: every item goes back to be sent sync.
      return collect(state, undefined);
    }
  }

  let round = carried?.round ?? 0;
  try {
    let next = 0;
    const take = (): PartState | undefined => (next < states.length && !handingOver ? states[next++] : undefined);
    for (; ; round += 1) {
      const open = states.slice(next).filter((state) => !state.collected).length;
      const lanes = new CancellationScope();
      await lanes.run(() =>
        inLanes(
          Math.min(open, options.maxActiveParts ?? 4),
          take,
          async (state) => {
            if (!state.collected) await runPart(state);
          },
          settles ? { settle: { onFailure: () => lanes.cancel() } } : {},
        ),
      );
      if (handingOver) break;
      // What this round handed back goes into new provider batches while the deadline leaves room for them (and for the
      // sync path after them); otherwise, or after the last round, it is handed back to be sent sync.
      const ended = states.filter((state) => state.round === round);
      const handedBack = ended.filter((state) => state.collected?.retry !== undefined);
      if (handedBack.length === 0 || round >= (options.retryRounds ?? 1)) break;
      const roundMs = Math.max(
        ...ended.map((state) => (state.endedAt ?? Date.now()) - (state.submittedAt ?? startedAt)),
      );
      if (deadline - Date.now() < RETRY_ROUND_MARGIN * roundMs) break;
      const { parts: more } = await long.planProviderBatch({
        ...planInput,
        retries: handedBack.map((state) => state.collected?.retry as string),
        firstIndex: states.length,
      });
      for (const state of handedBack) state.resubmitted = true;
      for (const part of more) states.push({ part, round: round + 1, attempt: 0 });
      changed();
    }
  } catch (error) {
    // Cancelled (or failed): no provider batch may run on unwatched, and nothing it answered may be lost.
    let cleanUpFailure: unknown;
    // Old runs: the first failure of a part's clean-up ends it (the others' batches left running).
    const eachPart = settles
      ? async (work: () => Promise<void>) => work().catch((failure: unknown) => void (cleanUpFailure ??= failure))
      : (work: () => Promise<void>) => work();
    await CancellationScope.nonCancellable(async () => {
      for (const state of states) {
        if (state.collected) continue;
        await eachPart(async () => {
          state.id ??= (await short.findProviderBatch(submitInput(state))) ?? undefined;
          if (state.id !== undefined) await short.cancelProviderBatch({ provider: state.part.provider, id: state.id });
        });
      }
      for (const state of states) {
        if (state.collected || state.id === undefined) continue;
        const id = state.id;
        await eachPart(async () => {
          const status = await untilEnded(state, id, false);
          if (status !== HANDED_OVER && status.state === 'ended') await collect(state, id);
        });
      }
    });
    // The run ends with what ended it; a part its clean-up could not reach is said here (its batch may still run).
    if (cleanUpFailure !== undefined)
      log.warn('a provider batch could not be cancelled or collected', { error: String(cleanUpFailure) });
    throw error;
  }
  if (handingOver && hooks.handOver) {
    // No activity is running (and, outside the try, a continue-as-new is not taken for a failure to clean up after).
    return hooks.handOver({
      startedAt,
      deadline,
      round,
      parts: states.map(({ info: _info, ...part }) => part),
      providerBatches: history,
      runs: runs + 1,
    });
  }

  const done = states.map((state) => state.collected as PartCollected);
  const retries = states.flatMap((state) =>
    state.resubmitted || state.collected?.retry === undefined ? [] : [state.collected.retry],
  );
  const retry = retries.length === 0 ? undefined : await long.joinProviderBatchRetries({ spool: input.spool, retries });
  const final = progress();
  return {
    segments: done.flatMap((part) => (part.segment === undefined ? [] : [part.segment])),
    succeeded: final.succeeded,
    failed: final.failed,
    ...usageOf(done),
    providerBatches: [...history].sort((left, right) => left.part - right.part || left.attempt - right.attempt),
    savingsUsd: final.savingsUsd,
    ...(retry === undefined ? {} : { retry }),
    ...(hooks.handOver ? { runs } : {}),
  };
}

/** The provider's refusal of a part (ProviderBatchRefused, never retried), or undefined for any other failure. */
function refusalOf(error: unknown): { type: string; message: string } | undefined {
  const cause = error instanceof ActivityFailure ? error.cause : undefined;
  if (!(cause instanceof ApplicationFailure) || cause.type !== 'ProviderBatchRefused') return undefined;
  return { type: cause.type, message: cause.message };
}

function pick<T extends object, K extends keyof T>(object: T, keys: K[]): Partial<Pick<T, K>> {
  const picked: Partial<Pick<T, K>> = {};
  for (const key of keys) if (object[key] !== undefined) picked[key] = object[key];
  return picked;
}

import type { WorkflowClient } from '@temporalio/client';
import type { AgentResult } from '../contract/agent-task';
import type { RunProgress } from '../contract/fan-out';
import type { PayloadStore } from '../store';
import { agentProgressQuery } from '../workflows/agent/messages';
import { isMessageRef, type AgentProgress, type MessageEntry } from '../contract/agent-loop';

/** A running agent (of a run, or a sub-agent of one) and what it reports. */
export interface RunningAgent {
  workflowId: string;
  progress: AgentProgress;
}

/** Sub-agents nest at most this deep (DEFAULT_MAX_AGENT_DEPTH is 2); the walk stops here whatever a run says. */
const MAX_WALK_DEPTH = 8;

/**
 * The running agents of a run, sub-agents included, each with its progress (events after `cursors[id]`). `root` is the
 * run's id: a fan-out, DAG or fan-in (its tasks with tools are agents; those `include` picks, by default the running
 * ones), a batch (its running agent items, `batchAgents`, from its progress) or an agent itself. With `finished`, an agent read before (it has a cursor) that is no longer running is read once
 * more for its last events (a sub-agent that answered since the last look), then added to `finished`.
 */
export async function runningAgents(
  workflows: WorkflowClient,
  root: { workflowId: string; type: string; progress?: RunProgress; batchAgents?: readonly string[] },
  {
    cursors = new Map<string, number>(),
    include = (task: RunProgress['tasks'][number]) => task.state === 'running',
    finished,
  }: {
    cursors?: Map<string, number>;
    include?: (task: RunProgress['tasks'][number]) => boolean;
    finished?: Set<string>;
  } = {},
): Promise<RunningAgent[]> {
  const found: RunningAgent[] = [];
  /** Reads one agent and, below it, its sub-agents; false when its query failed (it is tried again at the next look). */
  const visit = async (workflowId: string, depth: number): Promise<boolean> => {
    let progress: AgentProgress;
    try {
      progress = await workflows.getHandle(workflowId).query(agentProgressQuery, cursors.get(workflowId) ?? 0);
    } catch {
      return false; // not started yet, closed and gone, or the query timed out (a loaded worker): nothing to show now
    }
    found.push({ workflowId, progress });
    if (depth >= MAX_WALK_DEPTH) return true;
    // A sub-agent that finished since the last look is read once more, for its last events: counted as read only once
    // that read has worked, so a query that timed out does not lose its last events.
    const lastLooks = finished ? progress.finishedChildren.filter((child) => !finished.has(child)) : [];
    await Promise.all([
      ...progress.children.map((child) => visit(child, depth + 1)),
      ...lastLooks.map(async (child) => {
        if (await visit(child, depth + 1)) finished?.add(child);
      }),
    ]);
    return true;
  };
  if (root.type === 'agent') await visit(root.workflowId, 0);
  else if (root.type === 'batch') await Promise.all((root.batchAgents ?? []).map((id) => visit(id, 0)));
  else {
    const agents = (root.progress?.tasks ?? []).filter((task) => task.agentWorkflowId !== undefined && include(task));
    await Promise.all(agents.map((task) => visit(task.agentWorkflowId as string, 0)));
  }
  if (finished) {
    const seen = new Set(found.map((agent) => agent.workflowId));
    const gone = [...cursors.keys()].filter((workflowId) => !seen.has(workflowId) && !finished.has(workflowId));
    await Promise.all(
      gone.map(async (workflowId) => {
        if (await visit(workflowId, MAX_WALK_DEPTH)) finished.add(workflowId);
      }),
    );
  }
  return found;
}

/** Lines for `fanout status`: each running agent's spend, and every call that waits for a person. */
export function formatAgents(agents: readonly RunningAgent[]): string[] {
  return agents.flatMap(({ workflowId, progress }) => [
    `  agent ${progress.taskId} (${workflowId}): ${progress.steps} steps, ${progress.toolCalls} tool calls, ${progress.usage.totalTokens} tokens, $${progress.costUsd}`,
    ...progress.waiting.map(
      (call) =>
        `    waiting for approval: ${call.callId} ${call.summary} (step ${call.step}; denied unless answered by ${new Date(call.deadline).toISOString()}) -> fanout approve ${workflowId} ${call.callId}`,
    ),
  ]);
}

/** A run's results with each agent's transcript read back from the store: what `fanout results --json` prints. */
export async function withTranscripts<T extends { results?: AgentResult[]; synthesis?: AgentResult }>(
  value: T,
  store: PayloadStore,
): Promise<T> {
  const expand = async (result: AgentResult) => {
    if (!result.transcriptRef) return result;
    // Small messages are inline in the transcript, others stored by reference (MessageEntry).
    const entries = JSON.parse(await store.get(result.transcriptRef)) as MessageEntry[];
    return {
      ...result,
      transcript: await Promise.all(
        entries.map(async (entry) => (isMessageRef(entry) ? (JSON.parse(await store.get(entry)) as unknown) : entry)),
      ),
    };
  };
  return {
    ...value,
    ...(value.results ? { results: await Promise.all(value.results.map(expand)) } : {}),
    ...(value.synthesis ? { synthesis: await expand(value.synthesis) } : {}),
  };
}

/** One agent event as `fanout watch` prints it. */
export function formatAgentEvent(taskId: string, event: AgentProgress['events'][number]): string {
  return `${new Date(event.at).toISOString().slice(11, 23)} ${taskId} step ${event.step} ${event.type}: ${event.detail}`;
}

import {
  CancellationScope,
  ChildWorkflowCancellationType,
  ParentClosePolicy,
  condition,
  executeChild,
} from '@temporalio/workflow';
import type { AgentTask } from '../../contract/agent-task';
import { childOf } from '../../contract/location';
import type { AgentActivities } from './activity-options';
import { childFailure, spendOfFailure, startOnceFree } from './child-failure';
import { addSpend, spendSince, type AgentBudgets } from './spend';
import type { AgentTracker } from './tracker';
import {
  SPAWN_AGENTS_TOOL,
  toolCallSource,
  type AgentInput,
  type AgentOutcome,
  type AgentState,
  type AgentToolsStep,
  type SpawnedAgent,
  type ToolCallInput,
  type ToolCallRequest,
  type ToolCallResult,
  type WorkflowToolCall,
  type WorkflowToolName,
  type WorkflowToolTypes,
} from '../../contract/agent-loop';

/** What the tool calls of a step need of the agent that runs them. */
export interface ToolCallContext {
  task: AgentTask;
  input: AgentInput;
  depth: number;
  maxDepth: number;
  /** The agent's workflow id: its sub-agents' ids are derived from it. */
  selfId: string;
  state: AgentState;
  budgets: AgentBudgets;
  tracker: AgentTracker;
  toolCall: AgentActivities['toolCall'];
  /** Sets the agent's current details (the Temporal UI) to what it does now. */
  describe(now: string): void;
  /** The `agent` workflow, which sub-agents run as (handed in: agent.ts imports this file). */
  agentWorkflow: (input: AgentInput) => Promise<AgentOutcome>;
}

/** Runs the sub-agents of a `spawn_agents` call as child workflows, sharing what is left of this agent's budgets. */
async function spawn(
  context: ToolCallContext,
  call: WorkflowToolCall<typeof SPAWN_AGENTS_TOOL>,
  step: number,
  index: number,
): Promise<SpawnedAgent[]> {
  const { task, input, depth, maxDepth, selfId, state, tracker } = context;
  const { tokenLimit, costLimit } = context.budgets;
  const tasks = call.input;
  const share = (limit: number | undefined, used: number) =>
    limit === undefined ? undefined : Math.max(0, (limit - used) / tasks.length);
  const tokens = share(tokenLimit, state.usage.totalTokens);
  const costUsd = share(costLimit, state.costUsd);
  tracker.emit('spawned', step, `${tasks.length} sub-agents: ${tasks.map((spawned) => spawned.id).join(', ')}`);
  const running = tasks.map(async (child, position): Promise<SpawnedAgent> => {
    const workflowId = `${selfId}/sub-${step}-${index + 1}-${position + 1}`;
    tracker.children.add(workflowId);
    try {
      const start = () =>
        executeChild(context.agentWorkflow, {
          workflowId,
          args: [
            {
              task: child,
              // Validated by the `agentStep` that prepared the call (spawn-agents.ts), as its recorded result says.
              taskValidated: true,
              ...(input.options === undefined ? {} : { options: input.options }),
              inlineOutputBytes: input.inlineOutputBytes,
              depth: depth + 1,
              maxDepth,
              // Below the parent's place: a resumed parent's sub-agents go on from theirs (or return their answer).
              ...(input.place === undefined
                ? {}
                : { place: childOf(input.place, `sub-${step}-${index + 1}-${position + 1}`) }),
              sharedBudget: {
                ...(tokens === undefined ? {} : { tokens: Math.floor(tokens) }),
                ...(costUsd === undefined ? {} : { costUsd }),
              },
            },
          ],
          // The parent's scope cancels them; should the parent's run end anyway, the server asks them to cancel.
          cancellationType: ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
          parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
          staticSummary: `sub-agent of ${task.name ?? task.id}: ${child.prompt.slice(0, 80)}`,
        });
      // A resumed parent's sub-agent may still be ending from the run before (it saves its place as it goes).
      const result = await (input.place === undefined ? start() : startOnceFree(start));
      // What a sub-agent resumed from its place spent before was counted then (this agent's saved state holds it).
      const spent = spendSince({ usage: result.usage, costUsd: result.costUsd }, result.before);
      addSpend(state, { ...spent, ...(result.unpriced ? { unpriced: true } : {}) });
      return {
        id: child.id,
        status: result.status,
        ...(result.output === undefined ? {} : { output: result.output }),
        ...(result.outputRef === undefined ? {} : { outputRef: result.outputRef }),
        ...(result.message === undefined ? {} : { error: result.message }),
      };
    } catch (error) {
      const failure = childFailure(error);
      // This agent cancelled: its cancellation goes on up. A sub-agent cancelled on its own (from the UI, say) is a
      // failed sub-agent for the model, as it was meant to be.
      if (failure.cancelled && CancellationScope.current().consideredCancelled) throw error;
      // What a failed sub-agent spent is this agent's too.
      const spent = spendOfFailure(error);
      if (spent !== undefined) addSpend(state, spendSince(spent, spent.before));
      return { id: child.id, status: 'failed', error: failure.message };
    } finally {
      tracker.childEnded(workflowId);
    }
  });
  // Cancelled, every sub-agent is waited for: none outlives its parent's run, and each reports its spend to it first.
  const ended = await Promise.allSettled(running);
  const failure = ended.find((end) => end.status === 'rejected');
  if (failure) throw failure.reason;
  return ended.map((end) => (end as PromiseFulfilledResult<SpawnedAgent>).value);
}

/** The workflow's side of a tool it runs itself (WorkflowToolTypes): the `agentStep` activity prepared its input. */
interface WorkflowToolRunner<Name extends WorkflowToolName> {
  /** False when this agent cannot run it now (`spawn_agents` at the depth limit): the model is then not offered it. */
  available(context: ToolCallContext): boolean;
  run(
    context: ToolCallContext,
    call: WorkflowToolCall<Name>,
    step: number,
    index: number,
  ): Promise<WorkflowToolTypes[Name]['result']>;
}

const workflowTools: { [Name in WorkflowToolName]: WorkflowToolRunner<Name> } = {
  [SPAWN_AGENTS_TOOL]: { available: ({ depth, maxDepth }) => depth < maxDepth, run: spawn },
};

/** The task's tools this agent cannot run now, so not offered (AgentStepInput.withheld). */
export function withheldTools(context: ToolCallContext): string[] {
  const named = new Set(context.task.tools ?? []);
  return Object.entries(workflowTools).flatMap(([name, tool]) =>
    named.has(name) && !tool.available(context) ? [name] : [],
  );
}

function runWorkflowTool<Name extends WorkflowToolName>(
  context: ToolCallContext,
  call: WorkflowToolCall<Name>,
  step: number,
  index: number,
): Promise<WorkflowToolTypes[Name]['result']> {
  const tool: WorkflowToolRunner<Name> = workflowTools[call.name];
  return tool.run(context, call, step, index);
}

type ToolCallExtra = Pick<ToolCallInput, 'denied' | 'invalid' | 'workflowResult' | 'approval'>;

/**
 * One tool call of a step, by where it runs: refused with why, run here (a workflow tool), or in the `toolCall`
 * activity, through approval when the tool needs it. The activity stores every call's result; this resolves to it.
 * A call that waits for nothing first schedules its activity at once, in a promise chain (see runTools in agent.ts).
 */
export function runToolCall(
  context: ToolCallContext,
  result: AgentToolsStep,
  call: ToolCallRequest,
  index: number,
  step: number,
): Promise<ToolCallResult> {
  const { task, state, tracker } = context;
  // The task's answer cache goes to the call in its input (not a command): tools whose defineTool opted in use it. So
  // does where the call is (toolCallSource): histories of either shape replay alike.
  const base = {
    taskId: task.id,
    step,
    ...toolCallSource(result, call),
    index,
    ...(task.cache && task.cache.mode !== 'off' ? { cache: task.cache } : {}),
  };
  tracker.emit('tool-call', step, call.summary);
  const schedule = (extra: ToolCallExtra): Promise<ToolCallResult> =>
    context.toolCall
      .executeWithOptions({ activityId: `tool:${step}:${index + 1}`, summary: `step ${step}: ${call.summary}` }, [
        { ...base, ...extra },
      ])
      .then((done) => {
        state.toolCalls += 1;
        tracker.emit('tool-result', step, `${call.summary} ${done.detail}`);
        return done;
      });
  if (call.runner === 'none') return schedule({ invalid: call.invalid });
  if (call.runner === 'activity' && call.approvalTimeoutMs === undefined) return schedule({});
  return waitThenSchedule(context, call, step, index, schedule);
}

/** A call that waits first (a workflow tool's run, a person's approval), then schedules its `toolCall` activity. */
async function waitThenSchedule(
  context: ToolCallContext,
  call: ToolCallRequest,
  step: number,
  index: number,
  schedule: (extra: ToolCallExtra) => Promise<ToolCallResult>,
): Promise<ToolCallResult> {
  const { selfId, tracker } = context;
  let extra: ToolCallExtra = {};
  if (call.runner === 'workflow') extra = { workflowResult: await runWorkflowTool(context, call, step, index) };
  else if (call.runner === 'activity' && call.approvalTimeoutMs !== undefined) {
    const since = Date.now();
    tracker.waiting.set(call.id, {
      callId: call.id,
      tool: call.name,
      summary: call.summary,
      step,
      since,
      deadline: since + call.approvalTimeoutMs,
    });
    tracker.emit('approval-waiting', step, `${call.id} ${call.summary}`);
    context.describe(`waiting for approval of ${call.summary} (fanout approve ${selfId} ${call.id})`);
    // A durable timer: the wait holds no activity slot and costs nothing while it lasts.
    // Cancelled while it waits, it waits no more: the agent's last progress must not list it.
    const answered = await condition(() => tracker.decisions.has(call.id), call.approvalTimeoutMs).finally(() =>
      tracker.waiting.delete(call.id),
    );
    const decision = tracker.decisions.get(call.id);
    const wait = { askedAt: since, answeredAt: Date.now() };
    if (!answered || !decision) {
      extra = {
        denied: `no one approved the call within ${call.approvalTimeoutMs} ms`,
        approval: { ...wait, outcome: 'timed-out' },
      };
      tracker.emit('denied', step, `${call.id}: approval timed out`);
    } else if (!decision.approve) {
      extra = {
        denied: `a person denied the call${decision.reason ? `: ${decision.reason}` : ''}`,
        approval: { ...wait, outcome: 'denied' },
      };
      tracker.emit('denied', step, `${call.id}${decision.reason ? `: ${decision.reason}` : ''}`);
    } else {
      extra = { approval: { ...wait, outcome: 'approved' } };
      tracker.emit('approved', step, call.id);
    }
  }
  return schedule(extra);
}

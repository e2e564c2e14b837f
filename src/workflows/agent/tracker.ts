import { setHandler } from '@temporalio/workflow';
import type { AgentTask } from '../../contract/agent-task';
import { agentProgressQuery, approveUpdate } from './messages';
import type { AgentEvent, AgentState, PendingApproval } from '../../contract/agent-loop';

/** Events an agent keeps for `fanout watch`; older ones are dropped (and counted). */
const MAX_AGENT_EVENTS = 500;
/** Ended sub-agents the progress query names; older ones are dropped. */
const MAX_FINISHED_CHILDREN = 100;

/**
 * What `fanout watch` and `fanout approve` see of an agent: its events, the tool calls waiting for a person and the
 * answers given, its running and ended sub-agents. Answers the progress query and the approve update.
 */
export class AgentTracker {
  private readonly events: AgentEvent[] = [];
  /** The last event's number: carried across continue-as-new, so `fanout watch` reads on. */
  eventSeq: number;
  readonly waiting = new Map<string, PendingApproval>();
  readonly decisions = new Map<string, { approve: boolean; reason?: string }>();
  readonly children = new Set<string>();
  readonly finishedChildren: string[] = [];

  constructor(task: AgentTask, depth: number, state: AgentState, selfId: string) {
    this.eventSeq = state.eventSeq ?? 0;
    setHandler(agentProgressQuery, (cursor?: number) => ({
      taskId: task.id,
      depth,
      steps: state.steps,
      toolCalls: state.toolCalls,
      usage: state.usage,
      costUsd: state.costUsd,
      unpricedSteps: state.unpricedSteps,
      waiting: [...this.waiting.values()],
      children: [...this.children],
      finishedChildren: [...this.finishedChildren],
      events: this.events.filter((event) => event.seq > (cursor ?? 0)),
      dropped: this.eventSeq - this.events.length,
    }));
    setHandler(
      approveUpdate,
      (decision) => {
        this.decisions.set(decision.callId, {
          approve: decision.approve,
          ...(decision.reason === undefined ? {} : { reason: decision.reason }),
        });
        return { callId: decision.callId, approved: decision.approve };
      },
      {
        validator: (decision) => {
          if (!this.waiting.has(decision.callId)) {
            const open = [...this.waiting.keys()];
            throw new Error(
              `no call "${decision.callId}" waits for approval in ${selfId}${open.length > 0 ? `; waiting: ${open.join(', ')}` : ' (none waits)'}`,
            );
          }
        },
      },
    );
  }

  emit(type: AgentEvent['type'], step: number, detail: string): void {
    this.events.push({ seq: ++this.eventSeq, at: Date.now(), type, step, detail });
    if (this.events.length > MAX_AGENT_EVENTS) this.events.shift();
  }

  childEnded(workflowId: string): void {
    this.children.delete(workflowId);
    this.finishedChildren.push(workflowId);
    if (this.finishedChildren.length > MAX_FINISHED_CHILDREN) this.finishedChildren.shift();
  }
}

import type { PriceTable } from '../../pricing';
import type { PayloadStore } from '../../store';
import type { ToolRegistry } from '../../tools/registry';
import type { AgentLoopActivities } from '../../contract/agent-loop';
import type { ChatClient } from '../../llm/llm-client';
import { createAgentStep } from './agent-step';
import { MessageStore } from './message-store';
import { createToolCall } from './tool-call';

export interface AgentActivityDependencies {
  llm: ChatClient;
  defaultModel: string;
  clock: () => number;
  /** Heartbeat cadence of a model step in flight, where heartbeats are sent (ChatDependencies). */
  heartbeatIntervalMs: number;
  store: PayloadStore;
  prices: PriceTable;
  tools: ToolRegistry;
}

/** The activities of the `agent` workflow (AgentLoopActivities). */
export function createAgentActivities(dependencies: AgentActivityDependencies): AgentLoopActivities {
  const messages = new MessageStore(dependencies.store);
  return {
    agentStep: createAgentStep({ ...dependencies, messages }),
    toolCall: createToolCall({ ...dependencies, messages }),
  };
}

import type { SynthesisSection, DependencyOutput } from './agent-call';
import type { AgentTask } from './agent-task';
import type { TokenUsage } from './token-usage';
import type { AnswerCacheSettings } from './answer-cache';
import type { PayloadRef } from './payload-ref';
import type { RunOptions } from './run-options';

/**
 * The vocabulary of the `agent` workflow and its activities (`agentStep`, `toolCall`). Types only, plus constants: the
 * workflow sandbox, the activities and the CLI all import it.
 */

/** A chat message as the OpenAI API takes it (user, system, assistant with tool calls, tool). */
export type ChatMessage = Record<string, unknown> & { role: string };

/**
 * A message of a stored transcript: the message itself when it is small (`INLINE_MESSAGE_BYTES`), else a reference to
 * its own object in the payload store. A file per message cost more than the message: an assistant message asking for
 * two tools took a flushed file of its own and a 230-byte reference in the transcript beside it. A tool's result comes
 * back from `toolCall` the same way (ToolCallResult.message), so history carries a step's small tool results and
 * references to the large ones: bounded per step, whatever the conversation's length.
 */
export type MessageEntry = PayloadRef | ChatMessage;

/** Messages of at most this many bytes (as JSON) are kept inline (MessageEntry); larger ones are stored by reference. */
export const INLINE_MESSAGE_BYTES = 1024;

/** Whether a transcript entry is a reference to a stored message (else it is the message). */
export function isMessageRef(entry: MessageEntry): entry is PayloadRef {
  return !('role' in entry);
}

/** Failure types of an agent, beside those of src/contract/failure-types.ts. */
export const AgentFailureType = {
  /** The final answer did not match the task's `output` schema after every repair; the message names the last error. */
  OutputInvalid: 'OutputInvalid',
  /** The task names a tool no worker of the task queue has registered (nor its MCP servers). Never retried. */
  UnknownTool: 'UnknownTool',
  /**
   * An MCP server could not be reached (to list a step's tools, or in a tool call) on every attempt; the message names
   * the server (and the tool called). Retried, each attempt on a new connection.
   */
  ToolUnavailable: 'ToolUnavailable',
} as const;

/** How deep sub-agents may nest: a top-level agent is depth 0; its spawned sub-agents 1, theirs 2. */
export const DEFAULT_MAX_AGENT_DEPTH = 2;
/** Most sub-agents one `spawn_agents` call may start. */
export const MAX_SPAWNED_AGENTS = 20;
/** An approval nobody answers is denied after this long, unless the tool sets its own timeout, ms. */
export const DEFAULT_APPROVAL_TIMEOUT_MS = 24 * 60 * 60_000;
/** Model steps one workflow run takes before it continues as new (earlier when Temporal suggests it). */
export const DEFAULT_STEPS_PER_RUN = 100;
/** The built-in tool that runs sub-agents in parallel as child workflows. */
export const SPAWN_AGENTS_TOOL = 'spawn_agents';

/**
 * The tools the agent workflow runs itself, by name: they start child workflows, which only workflow code can. Each is
 * offered, and its arguments validated, by the `agentStep` activity like any tool (src/tools); what crosses over is
 * `input`, the arguments as the step validated them (WorkflowToolCall), and `result`, what the workflow's run returned,
 * which the `toolCall` activity turns into the tool message (ToolCallInput.workflowResult).
 */
export interface WorkflowToolTypes {
  [SPAWN_AGENTS_TOOL]: {
    /** The sub-agents' tasks, validated (large prompts already moved to the store). */
    input: AgentTask[];
    /** The finished sub-agents, in task order: their answers are the result. */
    result: SpawnedAgent[];
  };
}

export type WorkflowToolName = keyof WorkflowToolTypes;

/** One tool call the model asked for, as the workflow sees it: names and a short summary, never the arguments' bulk. */
interface ToolCallBase {
  /** The provider's id for the call (`call_…`): what `fanout approve <run> <call>` names. */
  id: string;
  name: string;
  /** `search("temporal batch")`: the arguments shortened, for activity summaries, events and approvals. */
  summary: string;
  /**
   * The arguments as the model sent them, when they are small (INLINE_MESSAGE_BYTES): the `toolCall` activity then gets
   * the call itself and reads nothing from the store. Absent when larger (it reads them from the step's `assistant`),
   * and in steps of workers before 0.3.0.
   */
  arguments?: string;
}

/** A call the `toolCall` activity runs: a function registered on the worker or a tool of its MCP servers. */
export interface ActivityToolCall extends ToolCallBase {
  runner: 'activity';
  /** Set when the tool is marked `needsApproval` on the worker: how long a person has to answer, ms. */
  approvalTimeoutMs?: number;
}

/** A call the workflow runs (WorkflowToolTypes), with its input; the `toolCall` activity then stores its result. */
export type WorkflowToolCall<Name extends WorkflowToolName = WorkflowToolName> = {
  [N in Name]: ToolCallBase & { runner: 'workflow'; name: N; input: WorkflowToolTypes[N]['input'] };
}[Name];

/** A call that cannot run (no such tool, arguments that are not JSON or do not fit): `invalid` goes back as its result. */
export interface RefusedToolCall extends ToolCallBase {
  runner: 'none';
  invalid: string;
}

/** One tool call of a step, by where it runs (`runner`). */
export type ToolCallRequest = ActivityToolCall | WorkflowToolCall | RefusedToolCall;

/** Input of the `agentStep` activity: one model call over the transcript so far. */
export interface AgentStepInput {
  /**
   * The agent's task. Steps after the first, whose transcript holds the prompt, get its settings only: `prompt` empty,
   * no `system` or `contentRef` (steps of workers before 0.3.0 carry it whole).
   */
  task: AgentTask;
  /** 1 for the first step. */
  step: number;
  /**
   * The transcript so far: a stored list of its messages (MessageEntry: small ones inline, others by reference). Absent
   * on the first step (built from the task).
   */
  transcript?: PayloadRef;
  /** Messages to add before calling: the previous step's tool results, in the order the model asked for them. */
  append?: MessageEntry[];
  /** A user message to add before calling (the validation error of an invalid structured answer). */
  note?: string;
  /** First step only: the DAG dependencies or synthesis inputs the prompt is built with. */
  dependencies?: DependencyOutput[];
  synthesis?: SynthesisSection[];
  /** Tools of the task not offered this step, which the workflow cannot run now (`spawn_agents` at the depth limit). */
  withheld?: string[];
  /** Final answers over this many bytes go to the store and return as `outputRef`. */
  inlineOutputBytes: number;
  /** Store the final answer even when small (a later task reads it by reference). */
  storeOutput?: boolean;
  /**
   * Benchmark only (bench/agents.ts): carry the transcript in the input and result, as integrations that copy the
   * conversation into every call do, instead of by reference.
   */
  inlineMessages?: unknown[];
}

/** What every model step returns, whatever comes next. */
export interface AgentStepBase {
  /** The transcript with this step's messages added. */
  transcript: PayloadRef;
  /**
   * The assistant message of this step, where it is stored on its own (a large one): the tool calls' arguments are read
   * from it when they do not travel with the calls. Absent when the message is inline at the end of `transcript`, which
   * is then where it is read (workers before 0.3.0 set it to `transcript` there).
   */
  assistant?: PayloadRef;
  model: string;
  finishReason: string | null;
  usage?: TokenUsage;
  costUsd?: number;
  unpriced?: boolean;
  /** The step's model call was answered from the answer cache: nothing sent, `costUsd` 0 (AgentCallResult.cached). */
  cached?: boolean;
  /** What that call would have cost, US dollars. */
  savedUsd?: number;
  /** See AgentCallResult. */
  cacheSavingsUsd?: number;
  attempt: number;
  durationMs: number;
  /** Benchmark only: the transcript inline (see AgentStepInput.inlineMessages). */
  inlineMessages?: unknown[];
}

/** The model asked for tools: the agent runs these calls (concurrently, results in this order), then its next step. */
export interface NextTools {
  next: 'tools';
  calls: ToolCallRequest[];
}

/** The model answered (matching the task's `output` when it has one): the agent ends with this answer. */
export interface NextAnswer {
  next: 'answer';
  output?: string;
  outputRef?: PayloadRef;
}

/** The model answered, but not as the task's `output` schema asks: the agent sends it back with why, or fails. */
export interface NextRepair {
  next: 'repair';
  /** Why the answer does not match `output`. */
  invalid: string;
}

/** What the agent does after a model step. */
export type AgentNextStep = NextTools | NextAnswer | NextRepair;

/** What one model step returns: its transcript and spend, and what the agent does next (`next`). */
export type AgentStepResult = AgentStepBase & AgentNextStep;

/** A step that asked for tools. */
export type AgentToolsStep = AgentStepBase & NextTools;

/** A finished sub-agent as the parent's `spawn_agents` result reports it. */
export interface SpawnedAgent {
  id: string;
  status: string;
  output?: string;
  outputRef?: PayloadRef;
  error?: string;
}

/**
 * Input of the `toolCall` activity: the call itself (`inlineCall`, its arguments small) or call `index` of the stored
 * assistant message (`assistant`), and the result the workflow already has where it has one.
 */
export interface ToolCallInput {
  taskId: string;
  step: number;
  /** The stored assistant message (or the transcript it ends) that holds the call; absent where `inlineCall` is given. */
  assistant?: PayloadRef;
  index: number;
  /** The call was denied (by a person or the approval timeout): this is its result, the tool is not run. */
  denied?: string;
  /** The call waited for a person's approval: when it asked, when it was answered (workflow time, epoch ms), and how. */
  approval?: ApprovalWait;
  /** The call cannot run (RefusedToolCall.invalid): this is its result. */
  invalid?: string;
  /** What the workflow's run of the tool returned (a WorkflowToolCall): the tool turns it into its result. */
  workflowResult?: WorkflowToolTypes[WorkflowToolName]['result'];
  /** The agent's answer cache: used for a tool whose `defineTool` set `cache: true`, ignored for the others. */
  cache?: AnswerCacheSettings;
  /** The call itself, when its arguments are small (ToolCallRequest.arguments): nothing is read from the store. */
  inlineCall?: { id: string; name: string; arguments: string };
  /** Benchmark only: the result inline. */
  inlineResult?: boolean;
}

/**
 * Where the `toolCall` activity finds call `call` of a step: the call itself where its arguments travel with it, else the
 * step's stored assistant message (or the transcript it ends, where the step returned none of its own).
 */
export function toolCallSource(
  step: AgentToolsStep,
  call: ToolCallRequest,
): Pick<ToolCallInput, 'assistant' | 'inlineCall'> {
  return call.arguments === undefined
    ? { assistant: step.assistant ?? step.transcript }
    : { inlineCall: { id: call.id, name: call.name, arguments: call.arguments } };
}

/** A tool call's wait for approval, as the toolCall activity traces it (`await_approval {tool}`). */
export interface ApprovalWait {
  askedAt: number;
  answeredAt: number;
  outcome: 'approved' | 'denied' | 'timed-out';
}

export interface ToolCallResult {
  /**
   * The tool message (`role: "tool"`): itself when it is small (INLINE_MESSAGE_BYTES), else a reference to it in the
   * store. Either way it is durable once the activity completes: in history, or flushed to the store before.
   */
  message: MessageEntry;
  /** False when the tool failed (its error went to the model as the result). */
  ok: boolean;
  /** A short description of the result for events. */
  detail: string;
  /** Benchmark only: the tool message inline. */
  inlineMessage?: unknown;
}

/** Spend an agent carries: its own steps and its sub-agents'. */
export interface AgentSpend {
  steps: number;
  toolCalls: number;
  usage: TokenUsage;
  costUsd: number;
  unpricedSteps: number;
  /** What prompt caches saved on its steps (see AgentCallResult); absent while nothing was. */
  cacheSavingsUsd?: number;
}

/** Tokens and dollars an agent of a batch had spent in the batch's earlier runs, when it went on from its saved place. */
export interface SpendBefore {
  usage: TokenUsage;
  costUsd: number;
}

/** What an agent run carries across continue-as-new: its place in the loop. */
export interface AgentState extends AgentSpend {
  transcript?: PayloadRef;
  append: MessageEntry[];
  note?: string;
  repairs: number;
  startedAt: number;
  model?: string;
  /** The last event's number, so `fanout watch` reads on across runs. */
  eventSeq?: number;
  /**
   * Only in a saved place (AgentPlace): the step whose tool calls were running when the agent stopped, with the results
   * that had come back. A resumed agent runs only the others, then goes on with its next model step.
   */
  pending?: PendingStep;
  /**
   * Set when the agent went on from a saved place: what it had spent before (part of its spend above). Its own budgets
   * count it; the batch's (and a parent's) count only what this run spent, as the earlier runs counted the rest.
   */
  before?: SpendBefore;
}

/** A step's tool calls part way through: the step's result, and each call's result once it has one. */
export interface PendingStep {
  step: number;
  result: AgentToolsStep;
  done: (ToolCallResult | null)[];
  /** Only in a saved place: what people had decided of the step's calls that wait for approval, by call id. */
  decisions?: Record<string, { approve: boolean; reason?: string }>;
}

/**
 * Where an agent of a batch keeps its place (a directory in the batch's storage): `place.json` there holds its state when
 * it ended without an answer (cancelled, stopped by a budget, failed), or its outcome once it answered. A resume of the
 * batch starts the agent with the same place, and it goes on from there: no model step or tool call that was answered is
 * sent again. Sub-agents keep theirs below it.
 */
export interface SavedPlace {
  state?: AgentState;
  outcome?: AgentOutcome;
  /**
   * The task the place is of (loadAgentPlace's `fingerprint`: a hash of its line, or of a sub-agent's task): a place
   * saved for another task (the file was edited, or a new batch writes to the sink of an old one) is not gone on from.
   */
  fingerprint?: string;
}

/** A batch item that is an agent: the agent reads its task from the batch's file (the window holds only offsets). */
export interface AgentBatchItem {
  file: string;
  fileBytes: number;
  id: string;
  offset: number;
  length: number;
}

/** The one argument of the `agent` workflow. */
export interface AgentInput {
  /** The task; an agent of a batch is given `item` instead and reads it from there. */
  task?: AgentTask;
  options?: RunOptions;
  inlineOutputBytes: number;
  storeOutput?: boolean;
  dependencies?: DependencyOutput[];
  synthesis?: SynthesisSection[];
  /** 0 for an agent of a run; 1 + its parent's for a sub-agent. */
  depth?: number;
  /** Default DEFAULT_MAX_AGENT_DEPTH. */
  maxDepth?: number;
  /** What is left of the budgets of the run (or the parent agent) this agent shares: tokens and dollars. */
  sharedBudget?: { tokens?: number; costUsd?: number };
  /** Steps per workflow run before continue-as-new. Default DEFAULT_STEPS_PER_RUN. */
  stepsPerRun?: number;
  /** Benchmark only: pass the transcript inline (see AgentStepInput.inlineMessages). */
  inlineTranscript?: boolean;
  /** Set by continue-as-new. */
  state?: AgentState;
  /** Set by a batch: the place the agent saves itself to and, when it has no `state`, goes on from (SavedPlace). */
  place?: string;
  /** Set by a batch in place of `task`, which is then read from the batch's file. */
  item?: AgentBatchItem;
  /**
   * Set by fanout's own workflows when `task` has passed agentTaskSchema already (their input's validation, or the
   * `agentStep` that prepared a `spawn_agents` call): the agent does not load the schema to check it again. A client
   * that starts an `agent` itself leaves it out.
   */
  taskValidated?: boolean;
  /** Set with `place` once the agent has loaded it: the fingerprint of its task, saved with its place (SavedPlace). */
  placeFingerprint?: string;
}

/** Why an agent stopped before answering: its (or the shared) budget of steps, tokens or dollars. */
export type AgentStopReason = 'steps' | 'tokens' | 'cost';

/** What the `agent` workflow returns. */
export interface AgentOutcome extends AgentSpend {
  status: 'ok' | 'stopped';
  stoppedBy?: AgentStopReason;
  /** Why it stopped, in words. */
  message?: string;
  output?: string;
  outputRef?: PayloadRef;
  model?: string;
  finishReason: string | null;
  unpriced?: boolean;
  /** Every message, by reference: kept when the agent stops early too. */
  transcript?: PayloadRef;
  /** What of its spend was spent in the batch's earlier runs (AgentState.before). */
  before?: SpendBefore;
}

/** A tool call waiting for a person. */
export interface PendingApproval {
  callId: string;
  tool: string;
  summary: string;
  step: number;
  /** Workflow time the wait began and when it times out (denied), ms since the epoch. */
  since: number;
  deadline: number;
}

/** One thing the agent did, for `fanout watch`. */
export interface AgentEvent {
  seq: number;
  at: number;
  type:
    | 'step'
    | 'tool-call'
    | 'tool-result'
    | 'approval-waiting'
    | 'approved'
    | 'denied'
    | 'answer'
    | 'repair'
    | 'spawned'
    | 'stopped'
    | 'continued';
  step: number;
  detail: string;
}

/** Answer of the `agentProgress` query. */
export interface AgentProgress extends AgentSpend {
  taskId: string;
  depth: number;
  waiting: PendingApproval[];
  /** Child workflow ids of sub-agents running now. */
  children: string[];
  /** Child workflow ids of the sub-agents that finished most recently (at most 100), for a watcher's last look. */
  finishedChildren: string[];
  events: AgentEvent[];
  /** Events dropped from the bounded log. */
  dropped: number;
}

/** Argument of the `approve` update. */
export interface ApprovalDecision {
  callId: string;
  approve: boolean;
  /** Why it was denied; the model reads it as the tool's result. */
  reason?: string;
}

/** The activities of the `agent` workflow: `agentStep` (one model call) and `toolCall` (one tool call). */
export interface AgentLoopActivities {
  agentStep(input: AgentStepInput): Promise<AgentStepResult>;
  toolCall(input: ToolCallInput): Promise<ToolCallResult>;
}

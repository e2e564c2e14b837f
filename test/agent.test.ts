import { z } from 'zod';
import type { AgentResult, AgentTask } from '../src/contract/agent-task';
import { withTranscripts } from '../src/cli/agent-view';
import { storeFromEnvironment } from '../src/store';
import { defineTool } from '../src/tools/define-tool';
import { agentProgressQuery, approveUpdate } from '../src/workflows/agent/messages';
import {
  activityInputText,
  modelCalls,
  scheduledActivities,
  startAgent,
  toolCalls,
  useAgentStack,
} from './support/agents';
import { uniqueName } from './support/test-stack';
import { waitFor } from './support/wait-for';

/** A tool whose approval times out quickly (the shared test tools wait a minute). */
const hastyApproval = defineTool({
  name: 'launch',
  description: 'Launches something (needs approval within 1.5 s)',
  input: z.object({ what: z.string() }),
  needsApproval: { timeoutMs: 1500 },
  run: ({ what }) => `launched ${what}`,
});

/** A tool that outlasts its timeout. */
const sluggish = defineTool({
  name: 'sluggish',
  description: 'Takes too long',
  input: z.object({}),
  timeoutMs: 300,
  run: (_input, { signal }) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve('too late'), 5000);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(signal.reason);
      });
    }),
});

const suite = useAgentStack({ tools: [hastyApproval, sluggish] });

const childOf = (runId: string, taskId: string) =>
  suite.stack.client.client.workflow.getHandle(`${runId}/agent:${taskId}`);

describe('agents with tools', () => {
  it('runs a tool-using task as a durable loop beside a plain task that stays one activity', async () => {
    const tasks: AgentTask[] = [
      { id: 'plain', prompt: 'just answer' },
      {
        id: 'researcher',
        prompt:
          'Research this [[tool:search {"q":"temporal batch","ms":400}, tool:fetch_page {"url":"https://temporal.io"}]] [[tool:search {"q":"durable agents"}]]',
        tools: ['search', 'fetch_page'],
      },
    ];
    const handle = await suite.stack.client.startParallel(tasks, undefined, { workflowId: uniqueName('agents') });
    const { results } = await handle.result();

    expect(results.map((result) => [result.id, result.status])).toEqual([
      ['plain', 'ok'],
      ['researcher', 'ok'],
    ]);
    // The results come back in the order the model asked for them, though fetch_page finished before the slow search.
    expect(results[1].output).toContain(
      'from 3 tool results: search found: temporal batch | fetch_page found: https://temporal.io | search found: durable agents',
    );
    expect(results[1].steps).toBe(3);
    expect(modelCalls(suite.servers.simulator, 'researcher')).toHaveLength(3);
    expect(
      toolCalls(suite.servers.simulator, 'search').filter((call) => call.workflowId.startsWith(handle.workflowId)),
    ).toHaveLength(2);
    const [slow, page] = suite.servers.simulator
      .log()
      .filter((request) => request.taskId === 'tool:search:call_1_1' || request.taskId === 'tool:fetch_page:call_1_2');
    expect(slow.arrivedAt).toBeLessThan((page.respondedAt ?? 0) + 1); // both ran at once

    // The plain task kept today's shape: one callAgent activity and no child workflow.
    const parent = await scheduledActivities(suite.stack.client.client.workflow.getHandle(handle.workflowId));
    expect(parent.map((activity) => activity.id)).toEqual(['agent:plain']);
    const child = childOf(handle.workflowId, 'researcher');
    expect((await scheduledActivities(child)).map((activity) => [activity.type, activity.summary])).toEqual([
      ['agentStep', 'step 1'],
      ['toolCall', 'step 1: search("temporal batch", 400)'],
      ['toolCall', 'step 1: fetch_page("https://temporal.io")'],
      ['agentStep', 'step 2'],
      ['toolCall', 'step 2: search("durable agents")'],
      ['agentStep', 'step 3'],
    ]);
    // Steps carry the transcript by reference; a small tool result travels in the next step's input, as in its
    // transcript (the next test: a large one by reference).
    const inputs = await activityInputText(child);
    expect(inputs).toContain('"step":3');
    expect(inputs).toContain('"content":"search found: durable agents"');
    // The prompt travels once, in the first step's input: later steps read it in the transcript.
    const steps = inputs.split('\n').filter((text) => text.includes('"step":') && text.includes('"task":'));
    expect(steps).toHaveLength(3);
    expect(steps.map((text) => text.includes('Research this'))).toEqual([true, false, false]);
  });

  it('carries a small tool result in history and a large one by reference, the model reading both whole', async () => {
    const long = `${'long result '.repeat(100)}end`;
    const task: AgentTask = {
      id: 'sizes',
      prompt: `Look both up [[tool:search {"q":"short"}, tool:search {"q":"${long}"}]]`,
      tools: ['search'],
    };
    const handle = await suite.stack.client.startParallel([task], undefined, { workflowId: uniqueName('tool-sizes') });
    const { results } = await handle.result();
    expect(results[0].status).toBe('ok');
    expect(modelCalls(suite.servers.simulator, 'sizes')).toHaveLength(2);

    // Over INLINE_MESSAGE_BYTES (1 KB), the result went to the store: history holds its reference, not its text.
    const inputs = await activityInputText(childOf(handle.workflowId, 'sizes'));
    const stepTwo = inputs.split('\n').find((input) => input.includes('"step":2')) ?? '{}';
    const { append } = JSON.parse(stepTwo) as { append?: unknown[] };
    expect(JSON.stringify(append)).not.toContain('long result');
    expect(append).toEqual([
      { role: 'tool', tool_call_id: 'call_1_1', content: 'search found: short' },
      { uri: expect.any(String), bytes: expect.any(Number), sha256: expect.stringMatching(/^[0-9a-f]{64}$/) },
    ]);
    // The calls' arguments likewise: the small ones travel with the call (its toolCall reads no file), the 1.2 KB ones
    // are read from the step's assistant message (stored on its own, being over 1 KB), which history names instead.
    const toolInputs = inputs
      .split('\n')
      .map((input) => JSON.parse(input) as { index?: number; inlineCall?: unknown; assistant?: unknown })
      .filter((input) => input.index !== undefined);
    expect(toolInputs).toEqual([
      expect.objectContaining({
        index: 0,
        inlineCall: { id: 'call_1_1', name: 'search', arguments: '{"q":"short"}' },
      }),
      expect.objectContaining({ index: 1, assistant: expect.objectContaining({ uri: expect.any(String) }) }),
    ]);
    expect(toolInputs[0]).not.toHaveProperty('assistant');
    expect(toolInputs[1]).not.toHaveProperty('inlineCall');
    // The transcript (read back from the store) holds both whole, in the order asked.
    const [withSteps] = (await withTranscripts({ results }, storeFromEnvironment().store)).results as (AgentResult & {
      transcript: { role: string; content: string }[];
    })[];
    expect(withSteps.transcript.filter((message) => message.role === 'tool').map((message) => message.content)).toEqual(
      ['search found: short', `search found: ${long}`],
    );
  });

  it('validates the task of an agent a client starts itself, and fails it InvalidInput when it does not fit', async () => {
    // fanout's own workflows start agents with a task they validated (taskValidated); any other client's is checked.
    const task = { id: 'not an id!', prompt: 'hello', tools: ['search'] } as AgentTask;
    const handle = await startAgent(suite.stack, uniqueName('unchecked-agent'), task);
    const failure = await handle.result().then(
      () => undefined,
      (error: unknown) => error as { cause?: { type?: string; message?: string } },
    );
    expect(failure?.cause).toMatchObject({ type: 'InvalidInput', message: expect.stringContaining('agent task:') });
    expect(modelCalls(suite.servers.simulator, 'not an id!')).toHaveLength(0);
  });

  it('sends a failing tool, a timed-out tool and input that fails the schema back to the model as tool results', async () => {
    const prompt = 'Try [[tool:broken {}]] [[tool:sluggish {}]] [[tool:search {"query":"wrong field"}]]';
    const handle = await suite.stack.client.startParallel([
      { id: 'clumsy', prompt, tools: ['broken', 'sluggish', 'search'] },
    ]);
    const { results } = await handle.result();
    expect(results[0].status).toBe('ok');
    const [withSteps] = (await withTranscripts({ results }, storeFromEnvironment().store)).results as (AgentResult & {
      transcript: { role: string; content: string }[];
    })[];
    const toolResults = withSteps.transcript
      .filter((message) => message.role === 'tool')
      .map((message) => message.content);
    expect(toolResults[0]).toBe('error: the broken tool is broken');
    expect(toolResults[1]).toBe('error: the tool ran past its 300 ms timeout');
    expect(toolResults[2]).toMatch(/^error: invalid input for search: .*q/s);
  });

  it('cancels an agent and its tool call in flight when another agent fails the run fast', async () => {
    const handle = await suite.stack.client.startParallel(
      [
        { id: 'doomed', prompt: 'no [sim latency=500 fault=403]' },
        { id: 'busy', prompt: 'Work [[tool:search {"q":"forever","ms":60000}]]', tools: ['search'] },
      ],
      { errorPolicy: 'fail-fast' },
    );
    const { results, stoppedBy } = await handle.result();
    expect(stoppedBy).toBe('fail-fast');
    expect(results.map((result) => result.status)).toEqual(['failed', 'cancelled']);
    const [call] = toolCalls(suite.servers.simulator, 'search').filter(
      (request) => request.workflowId === `${handle.workflowId}/agent:busy`,
    );
    expect(call.clientClosedAt).toBeDefined();
    expect((await childOf(handle.workflowId, 'busy').describe()).status.name).toBe('CANCELLED');
  });

  it('runs agents as DAG nodes and fan-in members, with dependency outputs in the prompt', async () => {
    const dag = await suite.stack.client.startDag([
      { id: 'root', prompt: 'root facts', dependsOn: [] },
      { id: 'user', prompt: 'Use {{deps.root}} [[tool:search {"q":"more"}]]', tools: ['search'], dependsOn: ['root'] },
    ]);
    const { results } = await dag.result();
    expect(results.map((result) => [result.id, result.status, result.steps])).toEqual([
      ['root', 'ok', undefined],
      ['user', 'ok', 2],
    ]);
    expect(results[1].output).toContain('answer to: Use [simulated] answer to: root facts');
    const fanIn = await suite.stack.client.startFanOutFanIn(
      [{ id: 'part', prompt: 'Part [[tool:search {"q":"p"}]]', tools: ['search'] }],
      { prompt: 'Combine.' },
    );
    const result = await fanIn.result();
    expect(result.results[0].steps).toBe(2);
    expect(result.synthesis.status).toBe('ok');
    // The agent's answer went to the store for the synthesis to read by reference, as a plain member's does.
    expect(result.results[0].output).toContain('search found: p');
    expect(result.results[0].outputRef).toBeDefined();
  });

  it('repairs an invalid structured answer once and returns the validated object', async () => {
    const output = {
      type: 'object',
      properties: { title: { type: 'string' }, sources: { type: 'integer' } },
      required: ['title', 'sources'],
    };
    const handle = await suite.stack.client.startParallel([
      { id: 'structured', prompt: 'Report [[invalid-json 1]] [[answer-json {"title":"Agents","sources":2}]]', output },
    ]);
    const { results } = await handle.result();
    expect(results[0].status).toBe('ok');
    expect(JSON.parse(results[0].output ?? '')).toEqual({ title: 'Agents', sources: 2 });
    expect(modelCalls(suite.servers.simulator, 'structured')).toHaveLength(2);
  });

  it("waits out the provider's rate limit inside a step's attempt, as plain calls do", async () => {
    suite.servers.simulator.configure({
      latency: { minMs: 20, maxMs: 20 },
      rateLimits: { requestsPerMinute: 60, burstSeconds: 1 },
    });
    try {
      const output = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
      // A model of its own: the worker's pacer keeps what it learnt of this model's limit, which the other tests must not inherit.
      const tasks = [1, 2, 3].map((n) => ({
        id: `limited-${n}`,
        model: 'rate-limited-model',
        // The first agent's first request is refused once for sure: a loaded machine may space the three out so far that the
        // pacer, taught by the first answer's headers, holds the others back before the bucket ever refuses one.
        prompt: `Count ${n === 1 ? '[sim fault=429 times=1 retry-after=1] ' : ''}[[invalid-json 1]] [[answer-json {"n":${n}}]]`,
        output,
      }));
      const handle = await suite.stack.client.startParallel(tasks);
      const { results } = await handle.result();
      expect(results.map((result) => [result.status, result.output])).toEqual([
        ['ok', '{"n":1}'],
        ['ok', '{"n":2}'],
        ['ok', '{"n":3}'],
      ]);
      const requests = suite.servers.simulator.log().filter((request) => request.taskId.startsWith('limited-'));
      expect(requests.filter((request) => request.outcome === 200)).toHaveLength(6);
      // Some were refused (429), and every request went out on the steps' first attempts: the limit cost time, not attempts.
      expect(requests.filter((request) => request.outcome === 429).length).toBeGreaterThan(0);
      expect(requests.every((request) => request.attempt === 1)).toBe(true);
    } finally {
      suite.servers.simulator.configure({ latency: { minMs: 20, maxMs: 20 } });
    }
  });

  it('fails an agent whose answer stays invalid after its repairs, naming the last error', async () => {
    const output = { type: 'object', properties: { title: { type: 'string' } }, required: ['title'] };
    const handle = await suite.stack.client.startParallel([
      { id: 'stubborn', prompt: 'Report [[invalid-json 5]]', output, outputRepairs: 1 },
    ]);
    const { results } = await handle.result();
    expect(results[0].status).toBe('failed');
    expect(results[0].error?.type).toBe('OutputInvalid');
    expect(results[0].error?.message).toMatch(/after 1 repairs: the answer is not JSON/);
    expect(modelCalls(suite.servers.simulator, 'stubborn')).toHaveLength(2);
  });

  it('stops an agent at its step budget with its transcript kept', async () => {
    const prompt = 'Loop [[repeat 5 tool:search {"q":"again"}]]';
    const handle = await suite.stack.client.startParallel([{ id: 'looper', prompt, tools: ['search'], maxSteps: 2 }]);
    const { results } = await handle.result();
    expect(results[0].status).toBe('failed');
    expect(results[0].error?.type).toBe('BudgetExhausted');
    expect(results[0].error?.message).toMatch(
      /stopped after 2 steps: its step budget \(2\) is spent; its transcript so far is kept at /,
    );
    expect(modelCalls(suite.servers.simulator, 'looper')).toHaveLength(2);
  });

  it('stops an agent at its token budget', async () => {
    const prompt = 'Loop [[repeat 5 tool:search {"q":"again and again"}]]';
    const handle = await suite.stack.client.startParallel([
      { id: 'spender', prompt, tools: ['search'], tokenBudget: 30 },
    ]);
    const { results } = await handle.result();
    expect(results[0].error?.type).toBe('BudgetExhausted');
    expect(results[0].error?.message).toMatch(/token budget \(30\) is spent/);
    expect(modelCalls(suite.servers.simulator, 'spender').length).toBeLessThan(5);
  });

  it("stops an agent at what is left of its run's token budget", async () => {
    const prompt = 'Loop [[repeat 8 tool:search {"q":"again and again"}]]';
    const handle = await suite.stack.client.startParallel([{ id: 'shared', prompt, tools: ['search'] }], {
      tokenBudget: 40,
    });
    const { results } = await handle.result();
    expect(results[0].error?.type).toBe('BudgetExhausted');
    expect(results[0].error?.message).toMatch(/its token budget \(40\) is spent/);
    expect(modelCalls(suite.servers.simulator, 'shared').length).toBeLessThan(8);
  });

  it('runs sub-agents of spawn_agents in parallel and returns their answers in task order', async () => {
    const spawn = JSON.stringify({
      tasks: [
        { prompt: 'first [sim latency=600]' },
        { prompt: 'second uses a tool [[tool:search {"q":"sub"}]]', tools: ['search'] },
        { prompt: 'third [sim latency=10]' },
      ],
    });
    const handle = await suite.stack.client.startParallel([
      { id: 'lead', prompt: `Delegate [[tool:spawn_agents ${spawn}]]`, tools: ['spawn_agents', 'search'] },
    ]);
    const { results } = await handle.result();
    expect(results[0].status).toBe('ok');
    // The spawn_agents result in the transcript: every sub-agent's answer, in task order.
    const [withSteps] = (await withTranscripts({ results }, storeFromEnvironment().store)).results as (AgentResult & {
      transcript: { role: string; content: string }[];
    })[];
    const spawned = JSON.parse(withSteps.transcript.find((message) => message.role === 'tool')?.content ?? '[]') as {
      id: string;
      status: string;
      output: string;
    }[];
    expect(spawned.map((agent) => [agent.id, agent.status])).toEqual([
      ['lead.1-1-1', 'ok'],
      ['lead.1-1-2', 'ok'],
      ['lead.1-1-3', 'ok'],
    ]);
    expect(spawned[1].output).toContain('search found: sub');
    expect(modelCalls(suite.servers.simulator, 'lead.1-1-2')).toHaveLength(2);
    const [first, , third] = ['lead.1-1-1', 'lead.1-1-2', 'lead.1-1-3'].map(
      (id) => modelCalls(suite.servers.simulator, id)[0],
    );
    expect(third.arrivedAt).toBeLessThan(first.respondedAt ?? 0); // in parallel
  });

  it("gives a task whose id reads like a sub-agent's an agent of its own, beside the agent whose sub-agent it mimics", async () => {
    const spawn = JSON.stringify({ tasks: [{ prompt: 'the real sub-agent' }] });
    const handle = await suite.stack.client.startParallel([
      { id: 'lead', prompt: `Delegate [[tool:spawn_agents ${spawn}]]`, tools: ['spawn_agents'] },
      // Still calling the model when the lead spawns: a second child of one id would be refused while the first runs.
      { id: 'lead/sub-1-1-1', prompt: 'a look-alike [sim latency=3000]', tools: ['search'] },
    ]);
    const { results } = await handle.result();
    expect(results.map((result) => [result.id, result.status])).toEqual([
      ['lead', 'ok'],
      ['lead/sub-1-1-1', 'ok'],
    ]);
    const workflows = suite.stack.client.client.workflow;
    const lookAlike = `${handle.workflowId}/agent:lead~sub-1-1-1`;
    expect((await handle.progress()).tasks.map((task) => task.agentWorkflowId)).toEqual([
      `${handle.workflowId}/agent:lead`,
      lookAlike,
    ]);
    // Each child ran its own task: the sub-agent the lead spawned, the look-alike the task of that id.
    const taskOf = async (workflowId: string) => {
      const history = await workflows.getHandle(workflowId).fetchHistory();
      const started = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
      return JSON.stringify(started?.data ? JSON.parse(Buffer.from(started.data).toString('utf8')) : undefined);
    };
    expect(await taskOf(`${handle.workflowId}/agent:lead/sub-1-1-1`)).toContain('the real sub-agent');
    expect(await taskOf(lookAlike)).toContain('a look-alike');
    const subAgentCalls = modelCalls(suite.servers.simulator, 'lead.1-1-1').filter(
      (request) => request.workflowId === `${handle.workflowId}/agent:lead/sub-1-1-1`,
    );
    expect(subAgentCalls).toHaveLength(1);
  });

  it('refuses spawn_agents beyond the depth limit, telling the model why', async () => {
    const inner = JSON.stringify({ tasks: [{ prompt: 'too deep' }] });
    const outer = JSON.stringify({
      tasks: [{ prompt: `nest [[tool:spawn_agents ${inner}]]`, tools: ['spawn_agents'] }],
    });
    const handle = await startAgent(
      suite.stack,
      uniqueName('deep'),
      { id: 'deep', prompt: `Go [[tool:spawn_agents ${outer}]]`, tools: ['spawn_agents'] },
      { maxDepth: 1 },
    );
    const outcome = (await handle.result()) as { status: string; output: string };
    expect(outcome.status).toBe('ok');
    // The sub-agent at depth 1 is not offered spawn_agents; its call is answered with why.
    const nested = (await suite.stack.client.client.workflow.getHandle(`${handle.workflowId}/sub-1-1-1`).result()) as {
      output: string;
    };
    expect(nested.output).toContain('error: there is no tool "spawn_agents"');
  });
});

describe('approvals', () => {
  const publishCalls = (runId: string) =>
    toolCalls(suite.servers.simulator, 'publish').filter((call) => call.workflowId.startsWith(runId));

  async function waitingCall(runId: string, taskId: string): Promise<string> {
    const child = childOf(runId, taskId);
    const progress = await waitFor('the call to wait for approval', async () => {
      const answer = await child.query(agentProgressQuery);
      return answer.waiting.length > 0 ? answer : undefined;
    });
    // Waiting holds no activity: nothing is pending on the server while the person decides.
    expect((await child.describe()).raw.pendingActivities ?? []).toHaveLength(0);
    return progress.waiting[0].callId;
  }

  /** Starts an agent `id` that publishes `title`, and waits for its call to ask for approval. */
  async function publishAwaitingApproval(id: string, title: string) {
    const handle = await suite.stack.client.startParallel([
      { id, prompt: `Ship [[tool:publish ${JSON.stringify({ title })}]]`, tools: ['publish'] },
    ]);
    return { handle, callId: await waitingCall(handle.workflowId, id) };
  }

  it('runs a call once a person approves it', async () => {
    const { handle, callId } = await publishAwaitingApproval('approved', 'Report A');
    expect(publishCalls(handle.workflowId)).toHaveLength(0);
    const refused = await childOf(handle.workflowId, 'approved')
      .executeUpdate(approveUpdate, { args: [{ callId: 'call_9_9', approve: true }] })
      .then(
        () => undefined,
        (error: unknown) => error as { cause?: { message?: string } },
      );
    expect(refused?.cause?.message).toMatch(/no call "call_9_9" waits for approval .*; waiting: call_1_1/);
    await childOf(handle.workflowId, 'approved').executeUpdate(approveUpdate, { args: [{ callId, approve: true }] });
    const { results } = await handle.result();
    expect(results[0].output).toContain('publish found: Report A');
    expect(publishCalls(handle.workflowId)).toHaveLength(1);
  });

  it('sends a denial and its reason to the model instead of running the call', async () => {
    const { handle, callId } = await publishAwaitingApproval('denied', 'Report B');
    await childOf(handle.workflowId, 'denied').executeUpdate(approveUpdate, {
      args: [{ callId, approve: false, reason: 'not before review' }],
    });
    const { results } = await handle.result();
    expect(results[0].output).toContain('denied: a person denied the call: not before review');
    expect(publishCalls(handle.workflowId)).toHaveLength(0);
  });

  it('denies a call nobody approves within its timeout', async () => {
    const handle = await suite.stack.client.startParallel([
      { id: 'ignored', prompt: 'Go [[tool:launch {"what":"rocket"}]]', tools: ['launch'] },
    ]);
    const { results } = await handle.result();
    expect(results[0].output).toContain('denied: no one approved the call within 1500 ms');
  });
});

it('continues as new in a long loop without repeating a step or a tool call', async () => {
  const workflowId = uniqueName('long');
  const handle = await startAgent(
    suite.stack,
    workflowId,
    { id: 'long', prompt: 'Go [[repeat 5 tool:search {"q":"step"}]]', tools: ['search'] },
    { stepsPerRun: 2 },
  );
  const outcome = (await handle.result()) as { status: string; steps: number; output: string };
  expect(outcome.status).toBe('ok');
  expect(outcome.steps).toBe(6);
  expect(outcome.output).toContain('from 5 tool results');
  expect(modelCalls(suite.servers.simulator, 'long').filter((call) => call.workflowId === workflowId)).toHaveLength(6);
  expect(toolCalls(suite.servers.simulator, 'search').filter((call) => call.workflowId === workflowId)).toHaveLength(5);
  const first = await suite.stack.client.client.workflow
    .getHandle(workflowId, handle.firstExecutionRunId)
    .fetchHistory();
  expect(first.events?.some((event) => event.workflowExecutionContinuedAsNewEventAttributes)).toBe(true);
});

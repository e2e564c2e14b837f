import type { AgentResult } from '../src/contract/agent-task';
import { withTranscripts } from '../src/cli/agent-view';
import { storeFromEnvironment } from '../src/store';
import { agentProgressQuery } from '../src/workflows/agent/messages';
import { toolCalls, useAgentStack } from './support/agents';
import { runCli } from './support/processes';
import { waitFor } from './support/wait-for';

const suite = useAgentStack();

/** A lead agent that hands each prompt to a sub-agent, in one spawn_agents call. */
const lead = (id: string, prompts: string[]) => ({
  id,
  prompt: `Delegate [[tool:spawn_agents ${JSON.stringify({ tasks: prompts.map((prompt) => ({ prompt, tools: ['search', 'publish'] })) })}]]`,
  tools: ['spawn_agents', 'search', 'publish'],
});

const waitsOn = (workflowId: string, callId: string) =>
  waitFor(`${workflowId} to wait for approval of ${callId}`, async () => {
    const progress = await suite.stack.client.client.workflow
      .getHandle(workflowId)
      .query(agentProgressQuery)
      .catch(() => undefined);
    return progress?.waiting.some((call) => call.callId === callId) ? true : undefined;
  });

/** The sub-agents' answers as the lead's spawn_agents call returned them, in task order. */
async function spawnedAnswers(result: AgentResult): Promise<{ id: string; status: string; output: string }[]> {
  const [withSteps] = (await withTranscripts({ results: [result] }, storeFromEnvironment().store))
    .results as (AgentResult & { transcript: { role: string; content: string }[] })[];
  return JSON.parse(withSteps.transcript.find((message) => message.role === 'tool')?.content ?? '[]') as {
    id: string;
    status: string;
    output: string;
  }[];
}

it("lists the calls sub-agents wait on in fanout status, and reaches them through the run's id and the lead agent's", async () => {
  const handle = await suite.stack.client.startParallel([
    lead('lead', [
      'one [[tool:publish {"title":"A"}]]',
      'two [[tool:search {"q":"x"}]] [[tool:publish {"title":"B"}]]',
    ]),
  ]);
  const leadId = `${handle.workflowId}/agent:lead`;
  const [first, second] = [`${leadId}/sub-1-1-1`, `${leadId}/sub-1-1-2`];
  await waitsOn(first, 'call_1_1');
  await waitsOn(second, 'call_2_1');

  const status = await runCli(['status', handle.workflowId, ...suite.connectionArgs]);
  expect(status.code).toBe(0);
  expect(status.stdout).toContain(`agent lead.1-1-1 (${first}): 1 steps, 0 tool calls`);
  expect(status.stdout).toContain(`waiting for approval: call_1_1 publish("A") (step 1;`);
  expect(status.stdout).toContain(`-> fanout approve ${first} call_1_1`);
  expect(status.stdout).toContain(`waiting for approval: call_2_1 publish("B") (step 2;`);
  expect(status.stdout).toContain(`-> fanout approve ${second} call_2_1`);

  // The run's id reaches the sub-agent that waits on the call; so does the lead agent's own id.
  const approved = await runCli(['approve', handle.workflowId, 'call_1_1', ...suite.connectionArgs]);
  expect([approved.code, approved.stdout, approved.stderr]).toEqual([0, `approved call_1_1 of ${first}\n`, '']);
  const denied = await runCli(['approve', leadId, 'call_2_1', '--deny', 'not B', ...suite.connectionArgs]);
  expect([denied.code, denied.stdout, denied.stderr]).toEqual([0, `denied call_2_1 of ${second}\n`, '']);

  const { results } = await handle.result();
  expect(results[0].status).toBe('ok');
  const answers = await spawnedAnswers(results[0]);
  expect(answers.map((answer) => [answer.id, answer.status])).toEqual([
    ['lead.1-1-1', 'ok'],
    ['lead.1-1-2', 'ok'],
  ]);
  expect(answers[0].output).toContain('publish found: A');
  expect(answers[1].output).toContain('denied: a person denied the call: not B');
  // Only the approved call ran.
  const published = toolCalls(suite.servers.simulator, 'publish').filter((call) =>
    call.workflowId.startsWith(handle.workflowId),
  );
  expect(published.map((call) => call.workflowId)).toEqual([first]);
});

it('refuses a call id two sub-agents wait on, naming both, and takes each by its own id', async () => {
  const handle = await suite.stack.client.startParallel([
    lead('twins', ['left [[tool:publish {"title":"L"}]]', 'right [[tool:publish {"title":"R"}]]']),
  ]);
  const [left, right] = [1, 2].map((n) => `${handle.workflowId}/agent:twins/sub-1-1-${n}`);
  await waitsOn(left, 'call_1_1');
  await waitsOn(right, 'call_1_1');

  const ambiguous = await runCli(['approve', handle.workflowId, 'call_1_1', ...suite.connectionArgs]);
  expect(ambiguous.code).not.toBe(0);
  expect(ambiguous.stderr).toContain('call call_1_1 waits in 2 agents; name one: ');
  expect(ambiguous.stderr).toContain(left);
  expect(ambiguous.stderr).toContain(right);

  expect((await runCli(['approve', right, 'call_1_1', ...suite.connectionArgs])).stdout).toBe(
    `approved call_1_1 of ${right}\n`,
  );
  expect((await runCli(['approve', left, 'call_1_1', '--deny', 'no', ...suite.connectionArgs])).stdout).toBe(
    `denied call_1_1 of ${left}\n`,
  );
  const { results } = await handle.result();
  const answers = await spawnedAnswers(results[0]);
  expect(answers[0].output).toContain('denied: a person denied the call: no');
  expect(answers[1].output).toContain('publish found: R');
  expect(
    toolCalls(suite.servers.simulator, 'publish')
      .filter((call) => call.workflowId.startsWith(handle.workflowId))
      .map((call) => call.workflowId),
  ).toEqual([right]);
});

it('takes a sub-agent cancelled on its own (not the lead) as a failed sub-agent, and the lead goes on', async () => {
  const handle = await suite.stack.client.startParallel([
    lead('solo', ['parked [[tool:publish {"title":"P"}]]', 'quick answer']),
  ]);
  const parked = `${handle.workflowId}/agent:solo/sub-1-1-1`;
  await waitsOn(parked, 'call_1_1');
  await suite.stack.client.client.workflow.getHandle(parked).cancel();

  const { results } = await handle.result();
  expect(results[0].status).toBe('ok');
  const answers = await spawnedAnswers(results[0]);
  expect(answers.map((answer) => [answer.id, answer.status])).toEqual([
    ['solo.1-1-1', 'failed'],
    ['solo.1-1-2', 'ok'],
  ]);
  expect((await suite.stack.client.client.workflow.getHandle(parked).describe()).status.name).toBe('CANCELLED');
  // The parked call never ran; each agent's model was asked once per step, none twice.
  expect(
    toolCalls(suite.servers.simulator, 'publish').filter((call) => call.workflowId.startsWith(handle.workflowId)),
  ).toEqual([]);
  const asked = suite.servers.simulator
    .log()
    .filter((request) => request.taskId?.startsWith('solo'))
    .map((request) => request.taskId);
  expect(asked.filter((id) => id === 'solo.1-1-1')).toHaveLength(1);
  expect(asked.filter((id) => id === 'solo.1-1-2')).toHaveLength(1);
  expect(asked.filter((id) => id === 'solo')).toHaveLength(2);
});

import type { SimulatedRequest, Simulator } from '../src/sim/simulator';
import { computeMetrics } from '../src/contract/metrics';
import { waitFor } from './support/wait-for';
import { useSimulators } from './support/suite-stack';

const simulator = useSimulators();

function complete(sim: Simulator, taskId: string, prompt = 'hello', signal?: AbortSignal): Promise<Response> {
  return fetch(`${sim.baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-fanout-task-id': taskId, 'x-fanout-attempt': '1' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: prompt }] }),
    signal,
  });
}

describe('the simulator', () => {
  it('answers an OpenAI-shaped completion that says it is simulated, and lists models', async () => {
    const sim = await simulator({ latency: { minMs: 0, maxMs: 0 } });
    const body = (await (await complete(sim, 'a', 'What is 2+2?')).json()) as {
      choices: { message: { content: string } }[];
      usage: { total_tokens: number };
    };
    expect(body.choices[0].message.content).toBe('[simulated] answer to: What is 2+2?');
    expect(body.usage.total_tokens).toBeGreaterThan(0);
    const models = (await (await fetch(`${sim.baseUrl}/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((model) => model.id)).toContain('gpt-4o-mini');
  });

  it('spreads latency per task reproducibly from its seed', async () => {
    const latencies = async (seed: number) => {
      const sim = await simulator({ seed, latency: { minMs: 0, maxMs: 200 } });
      await Promise.all(['a', 'b', 'c', 'd'].map((id) => complete(sim, id)));
      return sim
        .log()
        .sort((x, y) => x.taskId.localeCompare(y.taskId))
        .map((request) => request.latencyMs);
    };
    const first = await latencies(7);
    expect(await latencies(7)).toEqual(first);
    expect(await latencies(8)).not.toEqual(first);
    expect(new Set(first).size).toBeGreaterThan(1);
  });

  it('injects a scripted fault for the first N requests of a task, then answers', async () => {
    const sim = await simulator({
      latency: { minMs: 0, maxMs: 0 },
      faultsByTask: { flaky: { kind: '503', times: 2, retryAfterSeconds: 1 } },
    });
    const statuses = [];
    for (let index = 0; index < 3; index += 1) statuses.push((await complete(sim, 'flaky')).status);
    expect(statuses).toEqual([503, 503, 200]);
    const first = await complete(sim, 'other');
    expect(first.status).toBe(200);
    expect(sim.log().map((request) => request.taskRequest)).toEqual([1, 2, 3, 1]);
  });

  it('rolls rate faults from the seed, the same on every run', async () => {
    const outcomes = async () => {
      const sim = await simulator({
        seed: 'rates',
        latency: { minMs: 0, maxMs: 0 },
        faultRates: { '429': 0.2, '500': 0.1 },
      });
      const statuses: number[] = [];
      for (let index = 0; index < 100; index += 1) statuses.push((await complete(sim, `t${index}`)).status);
      return statuses;
    };
    const first = await outcomes();
    expect(await outcomes()).toEqual(first);
    const limited = first.filter((status) => status === 429).length;
    expect(limited).toBeGreaterThan(5);
    expect(limited).toBeLessThan(40);
    expect(first.filter((status) => status === 500).length).toBeGreaterThan(0);
  });

  it('logs a client disconnect, and serves its log and stats over HTTP', async () => {
    const sim = await simulator({ latency: { minMs: 60_000, maxMs: 60_000 } });
    const controller = new AbortController();
    const pending = complete(sim, 'aborted', 'x', controller.signal).catch(() => undefined);
    await waitFor('the request to arrive', () => sim.log().length === 1);
    controller.abort();
    await pending;
    await waitFor('the disconnect to be logged', () => sim.log()[0].clientClosedAt);
    const { requests } = (await (await fetch(`http://127.0.0.1:${sim.port}/_sim/log`)).json()) as {
      requests: SimulatedRequest[];
    };
    expect(requests[0]).toMatchObject({ taskId: 'aborted', attempt: 1 });
    expect(requests[0].respondedAt).toBeUndefined();
    const stats = await (await fetch(`http://127.0.0.1:${sim.port}/_sim/stats`)).json();
    expect(stats).toEqual({ total: 1, inFlight: 0, maxInFlight: 1 });
  });

  it('takes a new configuration over HTTP and refuses a bad one', async () => {
    const sim = await simulator();
    const put = (body: unknown) =>
      fetch(`http://127.0.0.1:${sim.port}/_sim/config`, { method: 'PUT', body: JSON.stringify(body) });
    expect((await put({ faultsByTask: { x: { kind: '401' } } })).status).toBe(200);
    expect((await complete(sim, 'x')).status).toBe(401);
    expect((await put({ latency: { minMs: 5, maxMs: 1 } })).status).toBe(400);
  });
});

describe('computeMetrics', () => {
  it('computes success rate, percentiles, efficiency and tokens', () => {
    const result = (id: string, status: 'ok' | 'failed' | 'cancelled', durationMs: number, attempts = 1) => ({
      id,
      name: id,
      status,
      durationMs,
      attempts,
      usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 },
    });
    const metrics = computeMetrics(
      [result('a', 'ok', 100), result('b', 'ok', 300), result('c', 'failed', 200), result('d', 'cancelled', 0, 0)],
      300,
    );
    expect(metrics).toMatchObject({
      total: 4,
      succeeded: 2,
      failed: 1,
      cancelled: 1,
      successRate: 0.5,
      sumTaskMs: 600,
      slowestTaskMs: 300,
      meanTaskMs: 200,
      p50TaskMs: 200,
      p95TaskMs: 300,
      parallelismEfficiency: 2,
      tokens: { prompt: 4, completion: 8, total: 12 },
    });
    expect(computeMetrics([], 0)).toMatchObject({ successRate: 0, parallelismEfficiency: 0, p95TaskMs: 0 });
  });
});

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { DagNode } from '../src/contract/dag';
import { criticalPath, parallelGroups } from '../src/contract/graph';
import { validateDagInput } from '../src/contract/validation';
import { promptWithDependencies, synthesisPrompt } from '../src/llm/prompt-context';
import { runCli } from './support/processes';
import { useTestStack } from './support/suite-stack';

const node = (id: string, dependsOn: string[] = [], prompt = `${id} [sim latency=50]`): DagNode => ({
  id,
  prompt,
  dependsOn,
});

describe('DAG validation and inspection', () => {
  it('names an unknown dependency', () => {
    expect(() => validateDagInput({ nodes: [node('a'), node('b', ['a', 'ghost'])] })).toThrow(
      'nodes[1].dependsOn[1]: unknown node "ghost"',
    );
  });

  it('names the path of a cycle', () => {
    expect(() =>
      validateDagInput({ nodes: [node('a', ['c']), node('b', ['a']), node('c', ['b']), node('d')] }),
    ).toThrow('nodes: dependency cycle: a -> b -> c -> a');
    expect(() => validateDagInput({ nodes: [node('self', ['self'])] })).toThrow('dependency cycle: self -> self');
  });

  it('names a duplicate id', () => {
    expect(() => validateDagInput({ nodes: [node('a'), node('a')] })).toThrow(
      'nodes[1].id: duplicate id "a" (first at nodes[0])',
    );
  });

  it('returns the topological levels in input order', () => {
    const graph = [
      node('researcher'),
      node('analyst', ['researcher']),
      node('fact_checker', ['researcher']),
      node('writer', ['analyst', 'fact_checker']),
    ];
    expect(parallelGroups(graph)).toEqual([['researcher'], ['analyst', 'fact_checker'], ['writer']]);
  });

  it('finds the critical path', () => {
    const graph = [node('a'), node('b', ['a']), node('c', ['a']), node('d', ['b', 'c'])];
    expect(
      criticalPath(
        graph,
        new Map([
          ['a', 100],
          ['b', 500],
          ['c', 200],
          ['d', 50],
        ]),
      ),
    ).toEqual({ path: ['a', 'b', 'd'], lengthMs: 650 });
  });

  it('fills {{deps.id}} templates, or appends a context section', () => {
    const outputs = [{ id: 'research', name: 'Research', output: 'FACTS' }];
    expect(promptWithDependencies('Write from {{deps.research}}.', outputs)).toBe('Write from FACTS.');
    expect(promptWithDependencies('Write.', outputs)).toBe(
      'Write.\n\n## Results of the tasks this one depends on\n\n### Research\nFACTS',
    );
  });

  it('includes failed agents in the synthesis prompt as notes', () => {
    const prompt = synthesisPrompt('Combine:', [
      { name: 'A', status: 'ok', output: 'alpha' },
      { name: 'B', status: 'failed', note: 'HTTP 403' },
    ]);
    expect(prompt).toBe('Combine:\n\n## A\nalpha\n\n## B\n(note: this agent failed: HTTP 403)');
  });
});

describe('dag and fanOutFanIn on a real dev server', () => {
  const suite = useTestStack({ worker: { heartbeatThrottleMs: 500 } });

  const requestOf = (workflowId: string, taskId: string) =>
    suite.servers.simulator.log().find((request) => request.workflowId === workflowId && request.taskId === taskId);

  it('starts each node as soon as its own dependencies finish, not level by level, and passes outputs on', async () => {
    const handle = await suite.stack.client.startDag([
      node('quick', [], 'quick topic [sim latency=100]'),
      node('slow', [], 'slow [sim latency=2500]'),
      node('follow', ['quick'], 'Use: {{deps.quick}} [sim latency=100]'),
      node('join', ['slow', 'follow'], 'join [sim latency=50]'),
    ]);
    const result = await handle.result();
    expect(result.results.map((agent) => agent.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
    const follow = requestOf(handle.workflowId, 'follow');
    const slow = requestOf(handle.workflowId, 'slow');
    expect(follow?.arrivedAt ?? Infinity).toBeLessThan(slow?.respondedAt ?? 0);
    expect(requestOf(handle.workflowId, 'join')?.arrivedAt ?? 0).toBeGreaterThanOrEqual(slow?.respondedAt ?? Infinity);
    expect(result.results[2].output).toContain('answer to: Use: [simulated] answer to: quick topic');
    expect(result.groups).toEqual([['quick', 'slow'], ['follow'], ['join']]);
    expect(result.metrics.criticalPath.path).toEqual(['slow', 'join']);
  });

  it('under continue, skips only the descendants of a failed node and runs independent branches', async () => {
    const result = await (
      await suite.stack.client.startDag([
        node('bad', [], 'x [sim fault=401]'),
        node('child', ['bad']),
        node('grandchild', ['child']),
        node('independent'),
      ])
    ).result();
    expect(result.results.map((agent) => agent.status)).toEqual(['failed', 'skipped', 'skipped', 'ok']);
    expect(result.results[2].error).toEqual({
      type: 'DependencyFailed',
      message: 'skipped: its dependency "bad" did not succeed',
    });
  });

  it('under fail-fast, cancels everything in flight', async () => {
    const handle = await suite.stack.client.startDag(
      [
        node('bad', [], 'x [sim fault=400 latency=200]'),
        node('long', [], 'x [sim latency=60000]'),
        node('after', ['long']),
      ],
      {
        errorPolicy: 'fail-fast',
      },
    );
    const result = await handle.result();
    expect(result.results.map((agent) => agent.status)).toEqual(['failed', 'cancelled', 'cancelled']);
    expect(requestOf(handle.workflowId, 'long')?.clientClosedAt).toBeDefined();
    expect(result.stoppedBy).toBe('fail-fast');
  });

  it('runs a fan-out then a synthesis agent over every output', async () => {
    const result = await (
      await suite.stack.client.startFanOutFanIn(
        [
          { id: 'sentiment', prompt: 'x [sim latency=100]' },
          { id: 'entities', prompt: 'x [sim fault=403]' },
        ],
        { name: 'Synthesiser', prompt: 'Combine the analyses.' },
      )
    ).result();
    expect(result.results.map((agent) => agent.status)).toEqual(['ok', 'failed']);
    expect(result.synthesis).toMatchObject({ id: 'synthesis', name: 'Synthesiser', status: 'ok' });
    expect(result.synthesis.output).toContain('Combine the analyses.');
    expect(result.metrics.total).toBe(3);
  });

  it('runs a DAG file from the CLI, and refuses a cyclic one naming the cycle', async () => {
    const directory = mkdtempSync(path.join(tmpdir(), 'fanout-dag-'));
    const good = path.join(directory, 'graph.jsonl');
    writeFileSync(
      good,
      [node('r'), node('a', ['r']), node('f', ['r']), node('w', ['a', 'f'])]
        .map((value) => JSON.stringify(value))
        .join('\n'),
    );
    const ran = await runCli(['run', good, ...suite.connectionArgs]);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toContain('parallel groups: [r] -> [a, f] -> [w]');
    expect(ran.stdout).toMatch(/critical path: r -> (a|f) -> w/);

    const cyclic = path.join(directory, 'cycle.json');
    writeFileSync(cyclic, JSON.stringify({ nodes: [node('a', ['b']), node('b', ['a'])] }));
    const refused = await runCli(['run', cyclic, '--address', '127.0.0.1:1']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('dependency cycle: a -> b -> a');
  });
});

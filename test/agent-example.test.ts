import { spawn } from 'node:child_process';
import path from 'node:path';

const ROOT = path.join(__dirname, '..');

function runExample(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const environment = { ...process.env };
    delete environment.OPENAI_API_KEY;
    delete environment.OPENAI_BASE_URL;
    const child = spawn(
      path.join(ROOT, 'node_modules', '.bin', 'tsx'),
      [path.join(ROOT, 'examples', 'research.ts'), ...args],
      { cwd: ROOT, env: environment },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

it('runs the research example in one command: two sub-agents, then a publish call a person approves', async () => {
  const { code, stdout, stderr } = await runExample([]);
  expect(stderr).toBe('');
  expect(code).toBe(0);
  for (const line of [
    'research step 1 spawned: 2 sub-agents: research.1-1-1, research.1-1-2',
    'research.1-1-1 step 1 tool-call: web_search("durable history")',
    'research.1-1-2 step 1 tool-call: web_search("agents cost")',
    'research step 2 approval-waiting: call_2_1 publish_report(',
    'research step 2 approved: call_2_1',
    'ok: 3 model steps',
    'published "Durable agents"',
  ]) {
    expect(stdout).toContain(line);
  }
});

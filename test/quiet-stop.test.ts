import { runCli } from './support/processes';

it('ends the demo (a worker stopped, its connection closed) without a word from the watchdog', async () => {
  const { code, stdout, stderr } = await runCli(['demo']);
  expect(code).toBe(0);
  expect(stdout + stderr).toContain('parallelism efficiency');
  // A presence poll still open when the connection closed was reported as "presence poll failed".
  expect(stderr).not.toMatch(/watchdog:|NativePromiseDroppedError/);
});

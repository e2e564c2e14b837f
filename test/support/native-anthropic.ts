/**
 * Imported first by a `*.anthropic.test.ts` file, before the suite it runs again: the suite's tasks (which name no
 * model) then go to a Claude model, so through Anthropic's Messages API natively (the simulator's `/v1/messages`),
 * in the workers of this process and in the `fanout worker` processes it spawns (they inherit the environment).
 */
export const NATIVE_ANTHROPIC_MODEL = 'claude-sonnet-4-5';

/** Makes the suites imported after this module run natively. */
export function runNatively(): void {
  process.env.FANOUT_MODEL = NATIVE_ANTHROPIC_MODEL;
}

/** Whether the suite runs through Anthropic natively. */
export function runsNatively(): boolean {
  return process.env.FANOUT_MODEL === NATIVE_ANTHROPIC_MODEL;
}

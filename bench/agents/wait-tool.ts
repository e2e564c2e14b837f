/**
 * The tool of the agents-at-scale benchmark (bench/compare.ts, scenario g), loaded by `fanout worker --tools`: waits the
 * milliseconds it is asked for, as a tool that calls a slow service would. The plain-SDK and asyncio loops have the same.
 */
import { z } from 'zod';
import { defineTool } from '../../src/tools/define-tool';

export const wait = defineTool({
  name: 'wait',
  description: 'Waits a number of milliseconds',
  input: z.object({ ms: z.number().int().min(0) }),
  run: async ({ ms }) => {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return `waited ${ms} ms`;
  },
});

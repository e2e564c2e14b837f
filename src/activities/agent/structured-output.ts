import { z } from 'zod';

/** Compiled validators by schema text: a worker validates many answers against few schemas. */
const validators = new Map<string, z.ZodType>();

function validatorFor(schema: Record<string, unknown>): z.ZodType {
  const key = JSON.stringify(schema);
  let validator = validators.get(key);
  if (!validator) {
    validator = z.fromJSONSchema(schema);
    validators.set(key, validator);
  }
  return validator;
}

/** The answer's JSON: the whole text, or the body of a ```json fence when the model wrapped it in one. */
function jsonText(answer: string): string {
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n?```\s*$/.exec(answer);
  return fenced ? fenced[1] : answer;
}

/**
 * Parses a final answer and validates it against the task's `output` JSON schema (zod's JSON-schema support). Returns
 * the validated value as canonical JSON, or why it is invalid, worded for the model to fix.
 */
export function validateAnswer(
  answer: string,
  schema: Record<string, unknown>,
): { json: string } | { invalid: string } {
  let value: unknown;
  try {
    value = JSON.parse(jsonText(answer));
  } catch (error) {
    return { invalid: `the answer is not JSON (${error instanceof Error ? error.message : String(error)})` };
  }
  const parsed = validatorFor(schema).safeParse(value);
  if (!parsed.success)
    return { invalid: `the answer does not match the schema: ${z.prettifyError(parsed.error).replace(/\n/g, '; ')}` };
  return { json: JSON.stringify(parsed.data) };
}

/** The instruction added to the conversation when a task has an output schema. */
export function outputInstruction(schema: Record<string, unknown>): string {
  return `When you give your final answer, answer with JSON only (no prose, no code fence) that matches this JSON schema:\n${JSON.stringify(schema)}`;
}

/**
 * JSON with every object's keys sorted, at every depth, and no whitespace: the same value gives the same bytes in any
 * process whatever order its keys were built in, so a request hashes the same on every worker. `undefined` members are
 * left out, as JSON.stringify leaves them out.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sorted(value));
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((item) => (item === undefined ? null : sorted(item)));
  if (value === null || typeof value !== 'object') return value;
  const object = value as Record<string, unknown>;
  const result: Record<string, unknown> = {};
  for (const key of Object.keys(object).sort()) {
    if (object[key] !== undefined) result[key] = sorted(object[key]);
  }
  return result;
}

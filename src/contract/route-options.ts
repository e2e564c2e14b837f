import { z } from 'zod';

/**
 * How a batch's items are sent. `sync`: chat completions as they are today (the default). `flex`: the same calls with
 * OpenAI's `service_tier: "flex"` (batch prices, slower, may be refused 429 when capacity is short; the standard tier near
 * the deadline). `provider-batch`: the providers' batch APIs (half price, answers within 24 h). `auto`: provider-batch
 * when the deadline allows it and the batch is large enough, sync otherwise.
 */
export const batchRouteSchema = z.enum(['sync', 'flex', 'provider-batch', 'auto']);
export type BatchRoute = z.infer<typeof batchRouteSchema>;

/** The route options a batch takes (sandbox-safe: zod only, for contract/batch.ts to extend its schema with). */
export const routeOptionsSchema = z.strictObject({
  route: batchRouteSchema.optional(),
  /** When the answers are needed, ms after the batch starts. Default 24 h for provider-batch and auto. */
  deadlineMs: z
    .number()
    .int()
    .min(1000)
    .max(7 * 24 * 60 * 60 * 1000)
    .optional(),
  /** OpenAI API the calls use: `chat` (chat completions, the default) or `responses`. */
  api: z.enum(['chat', 'responses']).optional(),
  /** Provider of a provider-batch route; default by model name (`claude-*` Anthropic, the rest OpenAI). */
  provider: z.enum(['openai', 'anthropic']).optional(),
});
export type RouteOptions = z.infer<typeof routeOptionsSchema>;

/** Fewest items `auto` sends as a provider batch: below it the wait is not worth the saving. */
export const AUTO_PROVIDER_BATCH_MIN_ITEMS = 1000;

/** Shortest deadline `auto` sends as a provider batch: the providers promise answers within 24 h. */
export const AUTO_PROVIDER_BATCH_MIN_DEADLINE_MS = 24 * 60 * 60 * 1000;

/** The route `auto` resolves to for a batch of `items` with `deadlineMs`. */
export function resolveAutoRoute(items: number, deadlineMs: number | undefined): 'sync' | 'provider-batch' {
  return items >= AUTO_PROVIDER_BATCH_MIN_ITEMS &&
    (deadlineMs ?? AUTO_PROVIDER_BATCH_MIN_DEADLINE_MS) >= AUTO_PROVIDER_BATCH_MIN_DEADLINE_MS
    ? 'provider-batch'
    : 'sync';
}

/**
 * Why a provider batch refuses a token or dollar budget. A provider batch is billed for every item it answers, known only
 * once it has ended, and items are answered in no order a budget could stop at: a cancel still pays for what was
 * answered by then. Holding a budget would mean sending the file a slice at a time, each slice sized from an estimate,
 * which gives up most of the wait the route is chosen for. A user who sets a budget expects it held, so the combination
 * is refused before anything is sent; `flex` sends at the same batch price and holds budgets, and `auto` with a budget
 * goes sync.
 */
export const PROVIDER_BATCH_BUDGET_REFUSAL =
  'a provider batch cannot keep to tokenBudget or costBudgetUsd (it is billed for what it answers, known only once it ends, and a cancel still pays for what was answered); use route "flex" (the same batch price, budgets held) or "sync", or drop the budget';

/** Whether the options set a token or dollar budget (a provider batch refuses one; `auto` then goes sync). */
export function hasBudget(options: { tokenBudget?: number; costBudgetUsd?: number } | undefined): boolean {
  return options?.tokenBudget !== undefined || options?.costBudgetUsd !== undefined;
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses a CLI duration such as `24h`, `90m`, `1d`, `3600s` or plain milliseconds; throws a TypeError naming the value. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!match) throw new TypeError(`"${text}" is not a duration (use e.g. 24h, 90m, 3600s)`);
  return Math.round(Number(match[1]) * UNITS[match[2] ?? 'ms']);
}

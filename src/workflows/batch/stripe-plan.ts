import type { Stripe } from '../../batch/stripes';
import { MAX_STRIPES, resolveBatchOptions, type BatchOptions } from '../../contract/batch';
import type { WindowStart } from './window-contract';

/**
 * Stripes a batch asks its scan for: enough that no window keeps more than `windowCalls` calls in flight, at most
 * MAX_STRIPES. One for a batch with a token or dollar budget (one window counts it) or sent as a provider batch (its
 * windows only run what the provider handed back). Pure: workflow code.
 */
export function stripesWanted(options: BatchOptions | undefined): number {
  if (options?.tokenBudget !== undefined || options?.costBudgetUsd !== undefined) return 1;
  if (options?.route === 'provider-batch') return 1;
  const { concurrency, windowCalls } = resolveBatchOptions(options);
  return Math.max(1, Math.min(MAX_STRIPES, Math.ceil(concurrency / windowCalls)));
}

/** The calls in flight stripe `stripe` of `stripes` keeps: the batch's concurrency shared out, the first ones one more. */
export function stripeConcurrency(concurrency: number, stripes: number, stripe: number): number {
  return Math.floor(concurrency / stripes) + (stripe < concurrency % stripes ? 1 : 0);
}

/**
 * Where each stripe's first window starts: the first at the file's start with the scan's first page (which stops where
 * the second stripe begins), each other at its first item, reading its own pages; each ends where the next begins.
 */
export function stripeStarts(first: WindowStart, stripes: Stripe[] | undefined): WindowStart[] {
  if (stripes === undefined || stripes.length < 2) return [first];
  return stripes.map((stripe, index) => ({
    ...first,
    cursor: index === 0 ? first.cursor : stripe.offset,
    firstPage: index === 0 ? first.firstPage : undefined,
    ...(index + 1 < stripes.length ? { end: stripes[index + 1].offset } : {}),
    unstarted: stripe.items,
  }));
}

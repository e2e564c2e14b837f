import type { Stripe } from '../../contract/batch-activities';
import type { WindowStart } from './window-contract';

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

import type { WindowInput } from './window-contract';

/** The providers' batch window, and the default deadline of a provider-batch route. */
export const DAY_MS = 24 * 60 * 60 * 1000;
/** A flex batch sends its calls at the standard tier once this close to its deadline. */
const FLEX_STANDARD_MARGIN_MS = 60 * 60 * 1000;

/** How the windows send their calls on a route: the flex tier (standard near the deadline), the Responses API. */
export function syncCallOptions(
  route: string,
  api: NonNullable<WindowInput['call']>['api'],
  deadlineMs: number | undefined,
  startedAtMs: number,
): WindowInput['call'] {
  return route === 'flex' || api !== undefined
    ? {
        ...(route === 'flex'
          ? {
              serviceTier: 'flex' as const,
              standardTierFromMs:
                startedAtMs + (deadlineMs ?? DAY_MS) - Math.min(FLEX_STANDARD_MARGIN_MS, (deadlineMs ?? DAY_MS) / 4),
            }
          : {}),
        ...(api === undefined ? {} : { api }),
      }
    : undefined;
}

import { retryAfterMs } from '../src/activities/provider-errors';

describe('retryAfterMs', () => {
  it('reads retry-after-ms first, in milliseconds', () => {
    expect(retryAfterMs(new Headers({ 'retry-after-ms': '1500', 'retry-after': '9' }))).toBe(1500);
  });

  it('reads retry-after in seconds', () => {
    expect(retryAfterMs(new Headers({ 'retry-after': '2' }))).toBe(2000);
    expect(retryAfterMs(new Headers({ 'retry-after': '0.5' }))).toBe(500);
  });

  it('reads retry-after as an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs(new Headers({ 'retry-after': 'Thu, 01 Jan 2026 00:00:30 GMT' }), now)).toBe(30_000);
  });

  it('ignores absent, negative and unreadable values', () => {
    expect(retryAfterMs(undefined)).toBeUndefined();
    expect(retryAfterMs(new Headers())).toBeUndefined();
    expect(retryAfterMs(new Headers({ 'retry-after': 'soon' }))).toBeUndefined();
    expect(retryAfterMs(new Headers({ 'retry-after-ms': '-5' }))).toBeUndefined();
  });

  it('caps absurd values at one hour', () => {
    expect(retryAfterMs(new Headers({ 'retry-after': '999999' }))).toBe(3_600_000);
  });
});

import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-node';

/** An export's result, as the exporter reports it (`ExportResult` of `@opentelemetry/core`). */
type ExportResult = Parameters<Parameters<SpanExporter['export']>[1]>[0];
/** `ExportResultCode` of `@opentelemetry/core` (a const enum there, not a dependency here). */
const SUCCESS = 0 satisfies ExportResult['code'];
const FAILED = 1 satisfies ExportResult['code'];

/** How long the first refused export stops exports, ms; each refused probe after it doubles it, up to the maximum. */
export const BREAKER_FIRST_PAUSE_MS = 5_000;
export const BREAKER_MAX_PAUSE_MS = 60_000;

/** What the breaker needs besides the exporter it guards. */
export interface ExportBreakerOptions {
  /** Where the breaker says, once, that the collector is unreachable and, once, that it answers again. */
  warn?: (message: string) => void;
  /** The clock, ms (tests). */
  now?: () => number;
  firstPauseMs?: number;
  maxPauseMs?: number;
  /** The collector's address, for the message. */
  endpoint?: string;
}

/** The error of every export the breaker fails at once (one object: a paused export costs no stack capture). */
const DROPPED = new Error('the OTLP collector is unreachable: spans dropped without an export');

/** HTTP statuses of a collector that is there but takes nothing now (the OTLP exporter's retryable ones). */
const UNAVAILABLE_STATUSES = new Set([429, 502, 503, 504]);

/**
 * Whether a failed export says the collector cannot be reached (refused, unresolvable, timed out, unavailable), rather
 * than that it refused this request (a 4xx: the collector is there, and the next batch may well go through).
 */
export function collectorUnreachable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return true;
  const { code } = error as { code?: unknown };
  if (typeof code === 'number') return UNAVAILABLE_STATUSES.has(code) || code >= 500;
  return true;
}

/**
 * A circuit breaker in front of the OTLP exporter. The exporter serialises every batch of spans and sends it, and on a
 * refused connection retries it with back-off until its timeout: with the collector down, every batch costs its
 * serialisation, a socket and timers, for nothing. After an export fails because the collector cannot be reached, the
 * breaker fails the exports of the next `firstPauseMs` at once, without serialising them (their spans are dropped, as
 * the failed export's were), then lets one through as a probe: refused again, the pause doubles (up to `maxPauseMs`);
 * answered, exports flow again. It says once that the collector is unreachable and once that it answers again, with
 * the spans dropped meanwhile, never per batch. Spans are lost, never waited for: tracing never holds up a call.
 */
export class ExportBreaker implements SpanExporter {
  private readonly warn: (message: string) => void;
  private readonly now: () => number;
  private readonly firstPauseMs: number;
  private readonly maxPauseMs: number;
  /** Exports fail at once until then (ms); 0 while the collector answers. */
  private pausedUntil = 0;
  private pauseMs: number;
  private tripped = false;
  private warned = false;
  /** Spans dropped since the breaker tripped (the failed exports' and the paused ones'). */
  private dropped = 0;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly options: ExportBreakerOptions = {},
  ) {
    this.warn = options.warn ?? ((message) => console.warn(`temporal-fanout: ${message}`));
    this.now = options.now ?? Date.now;
    this.firstPauseMs = options.firstPauseMs ?? BREAKER_FIRST_PAUSE_MS;
    this.maxPauseMs = options.maxPauseMs ?? BREAKER_MAX_PAUSE_MS;
    this.pauseMs = this.firstPauseMs;
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.tripped && this.now() < this.pausedUntil) {
      this.dropped += spans.length;
      resultCallback({ code: FAILED, error: DROPPED });
      return;
    }
    this.exporter.export(spans, (result) => {
      if (result.code === SUCCESS) this.closed();
      else if (collectorUnreachable(result.error)) this.trip(spans.length, result.error);
      resultCallback(result);
    });
  }

  private trip(spans: number, error: unknown): void {
    this.dropped += spans;
    if (this.tripped) this.pauseMs = Math.min(this.pauseMs * 2, this.maxPauseMs);
    this.tripped = true;
    this.pausedUntil = this.now() + this.pauseMs;
    if (this.warned) return;
    this.warned = true;
    const reason = (error as { code?: unknown; message?: unknown } | undefined)?.code ?? (error as Error)?.message;
    this.warn(
      `traces: the OTLP collector${this.options.endpoint ? ` at ${this.options.endpoint}` : ''} is unreachable` +
        `${reason === undefined ? '' : ` (${String(reason)})`}; spans are dropped, and exports tried again every ` +
        `${this.firstPauseMs / 1000}-${this.maxPauseMs / 1000} s until it answers`,
    );
  }

  private closed(): void {
    if (!this.tripped) return;
    this.tripped = false;
    this.pausedUntil = 0;
    this.pauseMs = this.firstPauseMs;
    if (this.warned)
      this.warn(`traces: the OTLP collector answers again; ${this.dropped} spans were dropped meanwhile`);
    this.warned = false;
    this.dropped = 0;
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }
}

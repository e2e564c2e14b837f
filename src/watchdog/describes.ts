import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import type { WatchdogLogger } from './watchdog-options';

export type Description = temporal.api.workflowservice.v1.IDescribeWorkflowExecutionResponse;

/** A protobuf integer field (a number, or a Long for int64) as a number. */
export function integer(value: unknown): number {
  return typeof value === 'number' ? value : Number(value ?? 0);
}

/**
 * The watchdog's DescribeWorkflowExecution reads (free, unlike a query), shared by the watches of running calls and the
 * lost-worker sweep: one warning when they start failing (any workflow), one line when they work again, never one per
 * read.
 */
export class Describes {
  private failures = 0;

  constructor(
    private readonly client: Client,
    private readonly logger: WatchdogLogger,
  ) {}

  read(workflowId: string, runId?: string): Promise<Description> {
    const connection = this.client.connection;
    return connection.withAbortSignal(new AbortController().signal, () =>
      connection.withDeadline(Date.now() + 10_000, () =>
        this.client.workflowService.describeWorkflowExecution({
          namespace: this.client.options.namespace,
          execution: { workflowId, runId },
        }),
      ),
    );
  }

  failed(error: unknown): void {
    this.failures += 1;
    if (this.failures === 1)
      this.logger.warn('describes failing; looking again with backoff', { error: String(error) });
  }

  worked(): void {
    if (this.failures > 0) this.logger.info('describes work again', { failedDescribes: this.failures });
    this.failures = 0;
  }
}

import { explainConnectionFailure } from './connection-diagnosis';
import type { TemporalConnectionConfig } from './environment';

/** What a connection to Temporal is opened with. */
export type ConnectOptions = Pick<TemporalConnectionConfig, 'address' | 'tls' | 'apiKey' | 'metadata'>;

/**
 * Opens a connection to `config` with `connect`: the client's `Connection.connect` or a worker's
 * `NativeConnection.connect`. A failure is explained in terms of the settings that fix it (see connection-diagnosis.ts).
 *
 * @example
 * const connection = await openConnection((options) => Connection.connect(options), temporalConnectionFromEnvironment());
 */
export function openConnection<C>(
  connect: (options: ConnectOptions) => Promise<C>,
  config: TemporalConnectionConfig,
): Promise<C> {
  return connect({
    address: config.address,
    tls: config.tls,
    apiKey: config.apiKey,
    metadata: config.metadata,
  }).catch(async (error: unknown) => {
    throw await explainConnectionFailure(error, config);
  });
}

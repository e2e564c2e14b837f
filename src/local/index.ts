/**
 * `temporal-fanout/local`: what runs everything on one machine, for development, demos and tests. Kept out of the
 * main entry point so a production worker or client loads none of it.
 */
export { startDevServer } from './dev-server';
export type { DevServer, DevServerOptions } from './dev-server';
export { startLocalStack } from './local-stack';
export type { LocalStack, LocalStackOptions } from './local-stack';
export { startSimulator } from '../sim/simulator';
export type { Simulator, SimulatedRequest, SimulatorStats } from '../sim/simulator';
export type { SimulatorConfigInput } from '../sim/config';

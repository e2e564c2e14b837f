export { batch, batchWindow } from './batch';
export { dag } from './dag';
export { fanOut } from './fan-out';
export { fanOutFanIn } from './fan-out-fan-in';
export { agent, agentProgressQuery, approveUpdate } from './agent';
export { providerBatch, providerBatchProgressQuery } from './provider-batch';
export { batchProgressQuery, eventsQuery, progressQuery } from './messages';

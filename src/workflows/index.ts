export { batch } from './batch';
export { dag } from './dag';
export { fanOut } from './fan-out';
export { fanOutFanIn } from './fan-out-fan-in';
export { batchProgressQuery, eventsQuery, progressQuery } from './messages';

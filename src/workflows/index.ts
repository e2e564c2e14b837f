export { batch } from './batch';
export { fanOut } from './fan-out';
export { batchProgressQuery, progressQuery } from './messages';

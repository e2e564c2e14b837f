export { fanOut } from './fan-out';
export { progressQuery } from './messages';

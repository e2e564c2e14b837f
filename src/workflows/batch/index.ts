export { batch } from './batch';
export { batchWindow, type WindowInput, type WindowResult } from './window';
export {
  handOverSignal,
  slotsFreedSignal,
  successorSignal,
  windowProgressQuery,
  type HandOver,
  type WindowProgress,
} from './messages';

export { batch } from './batch';
export { batchWindow, type WindowInput, type WindowResult } from './window';
// The window's messages: the hand-over, successor and slots-freed signals and the progress query, with their types.
export * from './messages';

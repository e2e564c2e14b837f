export { agent } from './agent';
export { agentProgressQuery, approveUpdate } from './messages';

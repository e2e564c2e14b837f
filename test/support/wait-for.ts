// The tests wait with the same loop as the local servers.
export { waitFor } from '../../src/local/wait-for';

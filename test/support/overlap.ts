import type { SimulatedRequest } from '../../src/sim/simulator';

/** The most requests that were open at the simulator at one moment, from their arrival and end times. */
export function maxOverlap(requests: readonly SimulatedRequest[]): number {
  const edges: [number, number][] = [];
  for (const request of requests) {
    const end = request.respondedAt ?? request.clientClosedAt ?? Number.POSITIVE_INFINITY;
    edges.push([request.arrivedAt, 1], [end, -1]);
  }
  // At equal times an end comes before a start: a slot freed and reused in the same millisecond is not overlap.
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let most = 0;
  for (const [, change] of edges) {
    open += change;
    most = Math.max(most, open);
  }
  return most;
}

import { WindowStops } from '../src/activities/batch/window-stops';

describe('a window stop on one worker', () => {
  it('stops every lane of the window in the same turn, a lane that joins while any is left, and no other window', () => {
    const stops = new WindowStops();
    const stopped: string[] = [];
    const window = WindowStops.key('batch/window-0', 'run-1');
    const other = WindowStops.key('batch/window-1', 'run-1');
    const leaveA = stops.join(window, () => stopped.push('a'));
    stops.join(window, () => stopped.push('b'));
    stops.join(other, () => stopped.push('other'));
    stops.stop(window);
    expect(stopped).toEqual(['a', 'b']);
    // Told once: a second lane hearing the same cancel stops nobody again.
    stops.stop(window);
    expect(stopped).toEqual(['a', 'b']);
    // A lane of the stopped window that starts now stops at once.
    stops.join(window, () => stopped.push('late'));
    expect(stopped).toEqual(['a', 'b', 'late']);
    leaveA();
    expect(stopped).toEqual(['a', 'b', 'late']);
  });

  it('forgets a window once its last lane here has left', () => {
    const stops = new WindowStops();
    const window = WindowStops.key('batch/window-0', 'run-1');
    const stopped: string[] = [];
    const leave = stops.join(window, () => stopped.push('a'));
    stops.stop(window);
    leave();
    // A retried attempt of a lane of a window Temporal still runs hears of its own cancel, not of this memory.
    stops.join(window, () => stopped.push('b'));
    expect(stopped).toEqual(['a']);
  });
});

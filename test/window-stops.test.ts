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

  it('remembers a stopped window after its last lane here has left: a lane that starts late stops at once', () => {
    const stops = new WindowStops();
    const window = WindowStops.key('batch/window-0', 'run-1');
    const stopped: string[] = [];
    const leave = stops.join(window, () => stopped.push('a'));
    stops.stop(window);
    leave();
    // A lane dispatched before the cancel that starts only now: the window's stop is final.
    stops.join(window, () => stopped.push('late'));
    expect(stopped).toEqual(['a', 'late']);
    // A window not stopped is forgotten with its last lane; another run of the same window id is another window.
    const other = WindowStops.key('batch/window-1', 'run-1');
    stops.join(other, () => stopped.push('other'))();
    stops.join(other, () => stopped.push('other again'));
    stops.join(WindowStops.key('batch/window-0', 'run-2'), () => stopped.push('next run'));
    expect(stopped).toEqual(['a', 'late']);
  });

  it('remembers a stop heard with no lane here, and at most 10,000 stopped windows', () => {
    const stops = new WindowStops();
    const stopped: string[] = [];
    stops.stop(WindowStops.key('batch/window-0', 'early'));
    stops.join(WindowStops.key('batch/window-0', 'early'), () => stopped.push('early'));
    expect(stopped).toEqual(['early']);
    for (let index = 0; index <= 10_000; index += 1) stops.stop(WindowStops.key(`batch/window-${index}`, 'many'));
    // The oldest is forgotten, the newest kept.
    stops.join(WindowStops.key('batch/window-0', 'many'), () => stopped.push('oldest'));
    stops.join(WindowStops.key('batch/window-10000', 'many'), () => stopped.push('newest'));
    expect(stopped).toEqual(['early', 'newest']);
  });
});

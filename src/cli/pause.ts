/**
 * Waits `ms`, or less if `until` settles first; either way no timer is left behind. A watch's pause between looks
 * ends the moment its run's result arrives, and the process can exit then: a timer left running would keep it up to
 * `ms` longer.
 */
export async function pause(ms: number, until: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([until, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

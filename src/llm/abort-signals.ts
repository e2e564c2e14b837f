/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Aborts `target` when any source aborts, with its reason; the returned function removes the listeners. */
export function linkAborts(target: AbortController, sources: readonly (AbortSignal | undefined)[]): () => void {
  const links: (() => void)[] = [];
  for (const source of sources) {
    if (!source) continue;
    if (source.aborted) {
      target.abort(source.reason);
      break;
    }
    const onAbort = () => target.abort(source.reason);
    source.addEventListener('abort', onAbort, { once: true });
    links.push(() => source.removeEventListener('abort', onAbort));
  }
  return () => links.forEach((unlinkOne) => unlinkOne());
}

import { readdirSync, readFileSync } from 'node:fs';

/** Reading processes from /proc, for the benchmarks that weigh a worker's memory and CPU (Linux only). */

/** A process and its descendants (`fanout worker` re-launches itself with a heap cap: the worker is the child). */
export function processTree(pid: number): number[] {
  const tree = [pid];
  for (let index = 0; index < tree.length; index += 1) {
    try {
      for (const task of readdirSync(`/proc/${tree[index]}/task`)) {
        const children = readFileSync(`/proc/${tree[index]}/task/${task}/children`, 'utf8').trim();
        if (children) tree.push(...children.split(/\s+/).map(Number));
      }
    } catch {
      // gone meanwhile
    }
  }
  return tree;
}

/** A process's peak (VmHWM) or current (VmRSS) resident memory, in MB. */
export function statusMb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024;
}

/** User + system CPU seconds of a process so far (clock ticks of 1/100 s); 0 once it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

import { Command } from 'commander';
import { taskQueueFromEnvironment, temporalConnectionFromEnvironment } from '../../config/environment';
import { createFanoutWorker } from '../../worker';
import { connectionOptions, positiveNumber, temporalOverrides, wholeNumber, type ConnectionFlags } from '../options';

interface WorkerFlags extends ConnectionFlags {
  maxConcurrent?: number;
  pollers?: number;
  rate?: number;
  queueRate?: number;
}

export function workerCommand(): Command {
  const command = new Command('worker')
    .description('run a worker: polls the task queue and runs the workflows and agent calls (until SIGINT/SIGTERM)')
    .option('--max-concurrent <n>', 'agent calls at once on this worker [env FANOUT_MAX_CONCURRENT_ACTIVITIES, default 500]', wholeNumber(1))
    .option('--pollers <n>', 'most concurrent activity polls, autoscaled [env FANOUT_ACTIVITY_POLLERS, default 100]', wholeNumber(1))
    .option('--rate <per-second>', 'agent calls this worker starts per second [env FANOUT_WORKER_ACTIVITIES_PER_SECOND]', positiveNumber)
    .option('--queue-rate <per-second>', 'agent calls per second across the task queue, server-enforced [env FANOUT_TASK_QUEUE_ACTIVITIES_PER_SECOND]', positiveNumber);
  for (const option of connectionOptions()) command.addOption(option);
  return command.action(async (flags: WorkerFlags) => {
    const temporal = { ...temporalConnectionFromEnvironment(), ...temporalOverrides(flags) };
    const taskQueue = flags.taskQueue ?? taskQueueFromEnvironment();
    const worker = await createFanoutWorker({
      temporal,
      taskQueue,
      maxConcurrentActivities: flags.maxConcurrent,
      activityPollers: flags.pollers,
      maxActivitiesPerSecond: flags.rate,
      maxTaskQueueActivitiesPerSecond: flags.queueRate,
    });
    const provider = process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1';
    process.stderr.write(`worker polling task queue "${taskQueue}" on ${temporal.address} (namespace ${temporal.namespace}); agents call ${provider}\n`);
    await worker.run();
  });
}

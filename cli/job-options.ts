// The flags that describe a job, shared by `enqueue` and `schedule add` (whose ticks enqueue it).
import type { Command } from 'commander';
import { collect, duration, int, keyValue } from './options.js';

/** The job's flags; `once` adds those only a single enqueue has (a run time, a key, a pass on placement). */
export function withJobOptions(cmd: Command, once = true): Command {
  cmd
    .option('-q, --queue <name>', 'queue')
    .option('-p, --priority <n>', 'higher runs first', int)
    .option('-e, --env <key=value>', 'environment variable (repeatable)', keyValue)
    .option('--secret-env <key=value>', 'environment variable hidden from status and logs (repeatable)', keyValue)
    .option('--cwd <dir>', 'working directory on the worker')
    .option('-t, --timeout <duration>', 'kill the job after this long (e.g. 30s, 5m)', duration)
    .option('--max-attempts <n>', 'attempts before the job fails (default 3)', int)
    .option('--region <region>', 'hard constraint: run only in this region (repeatable: one of)', collect)
    .option('--cpu <millicores>', 'CPU the job needs', int)
    .option('--memory <mb>', 'memory the job needs', int)
    .option('--disk <mb>', 'disk the job needs', int)
    .option('--label <key=value>', 'hard constraint: worker label (repeatable)', keyValue)
    .option('--prefer <key=value>', 'soft preference for workers with this label (repeatable)', keyValue);
  if (once)
    cmd
      .option('--run-at <iso-time>', 'do not start before this time')
      .option('--idempotency-key <key>', 'a repeat with the same key returns the first job')
      .option('--allow-unplaceable', 'accept the job even if no known worker could ever run it');
  return cmd;
}

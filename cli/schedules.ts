// skipjack schedule add|list|rm: cron schedules whose ticks enqueue a job.
import type { Command } from 'commander';
import type { SkipjackClient } from '../protocol/client.js';
import type { ScheduleView } from '../protocol/schedules.js';
import { toEnqueueJob, type EnqueueFlags } from './jobs.js';
import { withJobOptions } from './job-options.js';

export function addScheduleCommands(program: Command, client: () => SkipjackClient): void {
  const schedule = program
    .command('schedule')
    .description('cron schedules: each tick enqueues one job, however many servers run');

  withJobOptions(
    schedule
      .command('add')
      .description('add or replace a schedule: skipjack schedule add NAME --cron EXPR [job options] -- CMD ARGS...')
      .argument('<name>', 'the schedule name (1-64 of a-z 0-9 _ . -)')
      .argument('<command...>', 'the program and its arguments (no shell; use sh -c for one)')
      .requiredOption('--cron <expr>', 'five fields, minute first ("0 3 * * *"), or six with seconds first')
      .option('--tz <zone>', 'IANA time zone the expression is read in', 'UTC')
      .option('--paused', 'save it paused: no ticks until it is saved again without --paused'),
    false,
  ).action(
    async (name: string, command: string[], o: EnqueueFlags & { cron: string; tz: string; paused?: boolean }) => {
      const saved = await client().saveSchedule({
        name,
        cron: o.cron,
        timeZone: o.tz,
        paused: !!o.paused,
        job: toEnqueueJob(command, o),
      });
      process.stdout.write(
        `schedule ${saved.name} saved; ${saved.nextRunAt ? `next tick ${saved.nextRunAt}` : 'paused'}\n`,
      );
    },
  );

  schedule
    .command('list')
    .description('list schedules with their next tick and last job')
    .option('--json', 'print the schedules as JSON')
    .action(async (o: { json?: boolean }) => {
      const { schedules } = await client().schedules();
      if (o.json) process.stdout.write(JSON.stringify(schedules, null, 2) + '\n');
      else if (schedules.length === 0) process.stderr.write('no schedules\n');
      else process.stdout.write(scheduleTable(schedules));
    });

  schedule
    .command('rm')
    .description('remove a schedule (the jobs it enqueued stay)')
    .argument('<name>')
    .action(async (name: string) => {
      await client().removeSchedule(name);
      process.stdout.write(`schedule ${name} removed\n`);
    });
}

function scheduleTable(schedules: ScheduleView[]): string {
  const rows = [
    ['NAME', 'CRON', 'ZONE', 'NEXT', 'LAST JOB', 'COMMAND'],
    ...schedules.map((s) => [
      s.name,
      s.cron,
      s.timeZone,
      s.paused ? 'paused' : (s.nextRunAt ?? '-'),
      s.lastJobId === null ? '-' : String(s.lastJobId),
      s.job.command.join(' '),
    ]),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n') + '\n';
}

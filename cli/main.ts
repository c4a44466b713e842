#!/usr/bin/env node
// The skipjack command line.
import { Command, Option } from 'commander';
import pino from 'pino';
import { ApiRequestError, NotTheApiError, SkipjackClient, UnreachableError } from '../protocol/client.js';
import { describeEnd, enqueue, followToEnd, withFlagNamed, type EnqueueFlags } from './jobs.js';
import { collect, DEFAULT_SERVER_URL, duration, int, keyValue } from './options.js';
import { onStopSignals } from './signals.js';
import { withJobOptions } from './job-options.js';
import { addScheduleCommands } from './schedules.js';
import { jobTable, placementTable, workerTable } from './tables.js';
import { jobStates, type JobState } from '../protocol/states.js';

// The server, the worker, the simulator and the database are loaded by the commands that use
// them: through tsx, loading all of them made every command, enqueue included, start in 1.3 s.
const log = pino({ level: process.env.LOG_LEVEL ?? 'info' }, pino.destination(2));
const program = new Command('skipjack')
  .description('A Postgres-backed job orchestrator: enqueue commands, run them on workers, see why they wait.')
  .version('0.1.0')
  .addOption(new Option('--server <url>', 'server URL').env('SKIPJACK_URL').default(DEFAULT_SERVER_URL))
  .addOption(new Option('--token <token>', 'bearer token').env('SKIPJACK_TOKEN'))
  .showHelpAfterError('(add --help for usage)');

const client = () => {
  const o = program.opts<{ server: string; token?: string }>();
  return new SkipjackClient({ baseUrl: o.server, token: o.token });
};
const printJson = (v: unknown) => process.stdout.write(JSON.stringify(v, null, 2) + '\n');

const placementOption = () =>
  new Option(
    '--placement <mode>',
    'placement: pull (workers claim) or central (the server assigns); default $SKIPJACK_PLACEMENT or pull',
  ).choices(['pull', 'central']);

program
  .command('dev')
  .description('run a server and one local worker (embedded PostgreSQL unless DATABASE_URL is set)')
  .option('--slots <n>', 'jobs the local worker runs at once', int, 4)
  .option('--port <port>', 'HTTP port (default $PORT or 7070)', int)
  .addOption(placementOption())
  .action(async (o) => (await import('./dev.js')).runDev({ ...o, token: program.opts().token }, log));

program
  .command('server')
  .description('run the API server and its background loops (needs DATABASE_URL)')
  .option('--port <port>', 'HTTP port (default $PORT or 7070)', int)
  .option('--host <host>', 'address to bind (default $HOST or 127.0.0.1)')
  .addOption(placementOption())
  .action(async (o) => {
    const [{ configFromEnv }, { startServer }] = await Promise.all([
      import('../server/config.js'),
      import('../server/main.js'),
    ]);
    const config = configFromEnv(process.env, {
      ...(o.port !== undefined ? { port: o.port } : {}),
      ...(o.host ? { host: o.host } : {}),
      ...(o.placement ? { placementMode: o.placement } : {}),
    });
    const server = await startServer(config, log);
    await onStopSignals(
      log,
      () => server.close(),
      () => process.exit(1),
    );
  });

program
  .command('worker')
  .description('run a worker agent that claims and runs jobs')
  .option('--name <name>', 'worker name (default: hostname)')
  .option('--region <region>', 'region this worker is in')
  .option('--label <key=value>', 'a label (repeatable)', keyValue)
  .option('--cpu <millicores>', 'CPU capacity in millicores', int, 1000)
  .option('--memory <mb>', 'memory capacity in MB', int, 1024)
  .option('--disk <mb>', 'disk capacity in MB', int, 10_240)
  .option('--slots <n>', 'jobs run at once', int, 4)
  .option('--queue <name>', 'queue to take jobs from (repeatable; default "default")', collect)
  .option('--allow <patterns>', 'executables jobs may run, e.g. /usr/bin/*,/opt/tools/** (default: any)', collect)
  .addOption(
    new Option('--drain-timeout <duration>', 'on SIGTERM, how long running jobs may finish before they are requeued')
      .argParser(duration)
      .default(60, '60s'),
  )
  .option(
    '--claim-gather-ms <ms>',
    'with jobs running, how long a freed slot may wait for others to free up, to claim for them together (0: claim at once; at most a quarter of the heartbeat interval)',
    int,
    10,
  )
  .option(
    '--no-spawn-helper',
    'fork job processes from the worker itself instead of its small spawn helper process (slower)',
  )
  .action(async (o) => {
    const { server, token } = program.opts();
    const { WorkerAgent } = await import('../worker/agent.js');
    const worker = new WorkerAgent({
      serverUrl: server,
      token,
      name: o.name,
      region: o.region,
      labels: o.label,
      queues: o.queue,
      allow: o.allow,
      capacity: { cpu: o.cpu, memoryMb: o.memory, diskMb: o.disk, slots: o.slots },
      drainTimeoutMs: o.drainTimeout * 1000,
      claimGatherMs: Math.max(0, o.claimGatherMs),
      spawnHelper: o.spawnHelper,
      log,
    });
    // From the start: a stop while the worker registers (or waits for the server) is a stop too.
    const stopped = onStopSignals(
      log,
      () => worker.shutdown(),
      () => worker.stopAll(),
      () => worker.giveUp(),
    );
    // A start cut short by that stop is no failure: the stop goes on as asked.
    await worker.start().catch((err) => {
      if (worker.lifecycle === 'active') throw err;
    });
    await stopped;
  });

program
  .command('migrate')
  .description('apply database migrations (the server also does this when it starts)')
  .action(async () => {
    const [{ configFromEnv }, { createDb, migrateToLatest }] = await Promise.all([
      import('../server/config.js'),
      import('../server/db.js'),
    ]);
    const { db } = createDb(configFromEnv().databaseUrl || fail('DATABASE_URL is not set'));
    const applied = await migrateToLatest(db);
    await db.destroy();
    process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'already up to date\n');
  });

withJobOptions(
  program
    .command('enqueue')
    .description('enqueue a command: skipjack enqueue [options] -- CMD ARGS...')
    .argument('<command...>', 'the program and its arguments (no shell; use sh -c for one)'),
)
  .option(
    '--wait-placement <duration>',
    'fail (exit 3, with the reasons) unless the job is placed within this long',
    duration,
  )
  .option('-w, --wait', 'wait for the job, stream its output, and exit with its exit code')
  .option('--json', 'print the whole job as JSON')
  .action(async (command: string[], o: EnqueueFlags) => {
    process.exitCode = await enqueue(client(), command, o);
  });

program
  .command('status')
  .description('show a job')
  .argument('<id>', 'job id', int)
  .action(async (id: number) => {
    const job = await client().getJob(id);
    printJson(job);
    process.stderr.write(`job ${id}: ${describeEnd(job)}\n`);
  });

program
  .command('jobs')
  .description('list jobs, newest first')
  .addOption(new Option('--state <state>', 'only jobs in this state').choices(jobStates))
  .option('--queue <name>', 'only jobs of this queue')
  .option('--limit <n>', 'at most this many, 1-1000', int, 50)
  .option('--before <id>', 'only jobs older than this one (the next page starts at the last id shown)', int)
  .option('--json', 'print the page as JSON: {jobs, nextCursor}')
  .action(async (o: { state?: JobState; queue?: string; limit: number; before?: number; json?: boolean }) => {
    const page = await client().listJobs({ state: o.state, queue: o.queue, limit: o.limit, cursor: o.before });
    if (o.json) return void printJson(page);
    if (page.jobs.length === 0) return void process.stderr.write('no jobs\n');
    process.stdout.write(jobTable(page.jobs));
    if (page.nextCursor !== null) process.stderr.write(`more: skipjack jobs --before ${page.nextCursor}\n`);
  });

program
  .command('why')
  .alias('placement')
  .description("why a job runs where it does, or waits: each live worker's verdict on it")
  .argument('<id>', 'job id', int)
  .option('--json', 'print the verdicts as JSON')
  .action(async (id: number, o: { json?: boolean }) => {
    const placement = await client().placement(id);
    if (o.json) printJson(placement);
    else process.stdout.write(placementTable(placement));
  });

program
  .command('logs')
  .description("print a job's output")
  .argument('<id>', 'job id', int)
  .option('-f, --follow', "stream output until the job ends, then exit with the job's exit code (as enqueue --wait)")
  .action(async (id: number, o: { follow?: boolean }) => {
    if (o.follow) process.exitCode = await followToEnd(client(), id);
    else process.stdout.write(await client().logs(id));
  });

program
  .command('cancel')
  .description('cancel a job (a running one is killed by its worker)')
  .argument('<id>', 'job id', int)
  .action(async (id: number) => {
    const job = await client().cancel(id);
    process.stdout.write(
      job.state === 'cancelled' ? `job ${id} cancelled\n` : `job ${id}: cancel requested; its worker will stop it\n`,
    );
  });

program
  .command('workers')
  .description('list live workers: what each runs out of what it has')
  .option('--json', 'print the workers as JSON')
  .action(async (o: { json?: boolean }) => {
    const { workers } = await client().workers();
    if (o.json) printJson(workers);
    else if (workers.length === 0) process.stderr.write('no live workers\n');
    else process.stdout.write(workerTable(workers));
  });

program
  .command('drain')
  .description('ask a worker to stop claiming and finish its jobs')
  .argument('<worker-id>')
  .action(async (id: string) => {
    await client().drain(id);
    process.stdout.write(`worker ${id} draining\n`);
  });

program
  .command('deregister')
  .description(
    'take a worker out now, for good: its running jobs are taken back (recorded as lost) and it stops; prefer drain (with tokens set, needs an admin token)',
  )
  .argument('<worker-id>')
  .action(async (id: string) => {
    await client().deregister(id);
    process.stdout.write(`worker ${id} deregistered; its running jobs were taken back\n`);
  });

program
  .command('simulate')
  .description(
    "simulate a workload under pull, central, auction (Diego) and p2c (Sparrow) placement, with the server's filters and rankers",
  )
  .requiredOption(
    '--workload <preset|file>',
    'a preset (mm-c, regions, mixed, diurnal) or a workload JSON (see sim/examples/)',
  )
  .option('--models <list>', 'comma-separated: pull,central,auction,p2c', 'pull,central,auction,p2c')
  .option('--workers <n>', 'presets: how many workers', int)
  .option('--jobs <n>', 'how many arrivals', int)
  .option('--rate <r>', 'mm-c: arrivals per second; other presets: a load multiplier', parseFloat)
  .option('--mean-service <s>', 'presets: mean run time in seconds', parseFloat)
  .option('--seed <n>', 'the random seed (same seed, same result)', int)
  .option('--claim-seconds <s>', 'mm-c: the claim round trip (default 0)', parseFloat)
  .option('--wake-seconds <s>', 'mm-c: the long-poll wake-up (default 0)', parseFloat)
  .option('--json', 'print one JSON object, each model under its name (e.g. pull.meanWaitSeconds)')
  .option(
    '--report <dir>',
    'also write one self-contained HTML page with charts to DIR/sim-report.html (or to a path ending in .html)',
  )
  .option('--mode <mode>', 'old spelling of --models: pull, central or both')
  .action(async (o: Record<string, unknown> & { workload: string; models: string; mode?: string }) => {
    const { runSimulation, MODELS } = await import('./simulate.js');
    const list = o.mode ? (o.mode === 'both' ? 'pull,central' : o.mode) : o.models;
    const models = list.split(',').map((m) => m.trim());
    const unknown = models.filter((m) => !(MODELS as readonly string[]).includes(m));
    if (unknown.length) fail(`unknown model ${unknown.join(', ')} (known: ${MODELS.join(', ')})`);
    const command = ['skipjack', ...process.argv.slice(2)].join(' ');
    process.exitCode = runSimulation({ ...o, models: models as (typeof MODELS)[number][], command });
  });

addScheduleCommands(program, client);

function fail(message: string): never {
  process.stderr.write(`skipjack: ${message}\n`);
  process.exit(2);
}

// The API's hints speak of its fields; here they are flags.
const CLI_HINTS: Record<string, string> = {
  unplaceable: '--allow-unplaceable enqueues it anyway, to wait for such a worker',
};

program.parseAsync().catch((err: unknown) => {
  if (err instanceof ApiRequestError)
    fail(err.code && CLI_HINTS[err.code] ? `${err.message}\n(${CLI_HINTS[err.code]})` : withFlagNamed(err.message));
  if (err instanceof UnreachableError || err instanceof NotTheApiError) fail(err.message);
  // Not imported for its class: that would load the database code into every command.
  if (err instanceof Error && err.name === 'EmbeddedPostgresError') fail(err.message);
  log.error({ err }, 'failed');
  process.exit(1);
});

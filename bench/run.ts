// The benchmark runner: npm run bench -- [--scenario NAME] [--quick] [--profile DIR]
// Skipjack and its peers run against the same PostgreSQL in the same run, alternating, each on a
// fresh database. Results go to bench/results/NAME.json (NAME.quick.json with --quick).
import { Command, Option } from 'commander';
import { dropLeftoverDatabases, openPostgres } from './lib/postgres.js';
import { killAllChildren } from './lib/procs.js';
import { note } from './lib/progress.js';
import { machine, writeResult } from './lib/results.js';
import type { ScenarioContext, ScenarioOutput } from './scenarios/context.js';

const scenarios: Record<string, () => Promise<(ctx: ScenarioContext) => Promise<ScenarioOutput>>> = {
  throughput: async () => (await import('./scenarios/throughput.js')).throughput,
  latency: async () => (await import('./scenarios/latency.js')).latency,
  process: async () => (await import('./scenarios/process.js')).processSpawn,
  backlog: async () => (await import('./scenarios/backlog.js')).backlog,
  idle: async () => (await import('./scenarios/idle.js')).idle,
  retention: async () => (await import('./scenarios/retention.js')).retention,
  'cli-start': async () => (await import('./scenarios/cli-start.js')).cliStart,
};

const opts = new Command('bench')
  .description('Skipjack benchmarks, side by side with graphile-worker and pg-boss')
  .addOption(new Option('--scenario <name>', 'one scenario (default: all, in order)').choices(Object.keys(scenarios)))
  .option('--quick', 'smaller runs (about a minute each)')
  .option('--profile <dir>', 'write CPU profiles of the server (in-process) and the worker processes into dir')
  .parse()
  .opts<{ scenario?: string; quick?: boolean; profile?: string }>();

let cleaning = false;
async function cleanup() {
  if (cleaning) return;
  cleaning = true;
  killAllChildren();
  await dropLeftoverDatabases();
}
process.on('exit', killAllChildren);
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    note(`\n${sig}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

const pgs = await openPostgres(note);
note(`PostgreSQL ${pgs.version} (${pgs.source})`);
let failed = false;
try {
  for (const name of opts.scenario ? [opts.scenario] : Object.keys(scenarios)) {
    note(`\n== ${name}${opts.quick ? ' (quick)' : ''} ==`);
    const run = await scenarios[name]();
    const started = new Date();
    try {
      const out = await run({ pg: pgs, quick: !!opts.quick, profileDir: opts.profile });
      const file = writeResult({
        scenario: name,
        date: started.toISOString(),
        quick: !!opts.quick,
        machine: machine(),
        postgres: { server_version: pgs.version, source: pgs.source },
        skipjack: out.skipjack,
        peers: out.peers,
        ratios: out.ratios,
        notes: out.notes,
      });
      process.stdout.write(`\n${name}${opts.quick ? ' (quick)' : ''}\n${out.table}\n`);
      const ratios = Object.entries(out.ratios)
        .map(([k, v]) => `  ${k}: ${v ?? '-'}`)
        .join('\n');
      if (ratios) process.stdout.write(`ratios (Skipjack / other):\n${ratios}\n`);
      process.stdout.write(`-> ${file}\n`);
    } catch (err) {
      failed = true;
      note(`${name} failed: ${(err as Error).stack ?? err}`);
      await cleanup();
      cleaning = false;
    }
  }
} finally {
  await cleanup();
  await pgs.stop();
}
process.exit(failed ? 1 : 0);

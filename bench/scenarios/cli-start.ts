// CLI start: how long `skipjack --version` and `skipjack status ID` take from exec to exit, the
// compiled dist/ against the sources through tsx (SKIPJACK_FROM_SOURCE=1), each over `node -e 0`
// on the same machine at the same time. The server runs in this process; status asks it over HTTP.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { distIsCurrent } from '../../bin/sources.mjs';
import { createBenchDatabase } from '../lib/postgres.js';
import { note, Progress } from '../lib/progress.js';
import { table } from '../lib/results.js';
import { repoRoot, startSkipjack } from '../lib/skipjack.js';
import { round, summarize, wallMs } from '../lib/stats.js';
import type { ScenarioContext, ScenarioOutput } from './context.js';

interface Variant {
  name: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
}

/** Wall time from spawn to exit, in ms; a non-zero exit fails the scenario. */
function timeRun(v: Variant): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = wallMs();
    const child = spawn(v.command, v.args, { env: { ...process.env, ...v.env }, stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(wallMs() - t0) : reject(new Error(`${v.name} exited with code ${code}`)),
    );
  });
}

async function run(command: string, args: string[]): Promise<void> {
  await timeRun({ name: `${command} ${args.join(' ')}`, command, args });
}

export async function cliStart(ctx: ScenarioContext): Promise<ScenarioOutput> {
  if (!distIsCurrent(repoRoot)) {
    note('dist/ is missing or older than the sources: npm run build');
    await run(process.execPath, [join(repoRoot, 'scripts', 'build.mjs')]);
  }
  const rounds = ctx.quick ? 10 : 30;
  const db = await createBenchDatabase(ctx.pg, 'sj_cli');
  const sj = await startSkipjack(db.url);
  try {
    const job = await sj.client.enqueue({ command: ['true'] });
    const skipjack = join(repoRoot, 'bin', 'skipjack');
    const status = ['--server', sj.server.url, 'status', String(job.id)];
    const tsx = { SKIPJACK_FROM_SOURCE: '1' };
    const variants: Variant[] = [
      { name: 'node -e 0', command: process.execPath, args: ['-e', '0'] },
      { name: '--version, compiled', command: skipjack, args: ['--version'] },
      { name: '--version, tsx', command: skipjack, args: ['--version'], env: tsx },
      { name: 'status, compiled', command: skipjack, args: status },
      { name: 'status, tsx', command: skipjack, args: status, env: tsx },
    ];
    const samples = new Map(variants.map((v) => [v.name, [] as number[]]));
    for (const v of variants) await timeRun(v); // warm the page cache and tsx's compile cache
    // Round-robin, so that whatever else the machine does falls on every variant alike.
    const progress = new Progress('cli start', rounds);
    for (let i = 0; i < rounds; i++) {
      for (const v of variants) samples.get(v.name)!.push(await timeRun(v));
      progress.update(i + 1);
    }
    progress.done();
    const summary = Object.fromEntries([...samples].map(([name, s]) => [name, summarize(s)]));
    const median = (name: string) => summary[name]!.p50Ms;
    const node = median('node -e 0');
    const over = (name: string) => round(median(name) / node, 2);
    return {
      skipjack: { rounds, ms: summary },
      peers: {},
      ratios: {
        '--version compiled / node -e 0': over('--version, compiled'),
        '--version tsx / node -e 0': over('--version, tsx'),
        'status compiled / node -e 0': over('status, compiled'),
        'status tsx / node -e 0': over('status, tsx'),
        'status compiled / tsx': round(median('status, compiled') / median('status, tsx'), 2),
      },
      notes: [
        `${rounds} rounds; each round runs every variant once, in turn, after one warm-up run each.`,
        'ms: wall time from spawn to exit of bin/skipjack (sh, then node with the heap flag); status asks the server in this process for one pending job.',
        'compiled: dist/ (npm run build); tsx: SKIPJACK_FROM_SOURCE=1, the TypeScript compiled at start (tsx caches its output on disk).',
      ],
      table: table([
        ['command', 'p50 ms', 'p90 ms', 'over node -e 0'],
        ...variants.map((v) => [v.name, round(median(v.name), 1), round(summary[v.name]!.p90Ms, 1), over(v.name)]),
      ]),
    };
  } finally {
    await sj.close();
    await db.drop();
  }
}

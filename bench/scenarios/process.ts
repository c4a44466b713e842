// Process: /bin/true jobs through Skipjack's real 'process' executor (the CLI worker), against a
// bare Node loop spawning /bin/true at the same concurrency, and a posix_spawn loop in C.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBenchDatabase } from '../lib/postgres.js';
import { childProfileArgs, profiled } from '../lib/profile.js';
import { note } from '../lib/progress.js';
import { ratio, table } from '../lib/results.js';
import { benchRoot, drainSpan, enqueueMany, startSkipjack, startWorkers, waitTerminal } from '../lib/skipjack.js';
import type { ScenarioContext, ScenarioOutput } from './context.js';

const TRUE = '/bin/true';

async function skipjackRun(ctx: ScenarioContext, n: number, slots: number) {
  const db = await createBenchDatabase(ctx.pg, 'sj_process');
  const sj = await startSkipjack(db.url);
  try {
    await enqueueMany(sj.client, n, { command: [TRUE] }, 'skipjack: enqueue');
    return await profiled(ctx.profileDir, 'process', async () => {
      const workers = await startWorkers(sj.server.url, 1, slots, {
        kind: 'cli',
        nodeArgs: childProfileArgs(ctx.profileDir, 'worker-process'),
      });
      try {
        await waitTerminal(sj, n, `skipjack: ${slots} slots`);
      } finally {
        await workers.stop();
      }
      return drainSpan(sj.pool);
    });
  } finally {
    await sj.close();
    await db.drop();
  }
}

/** bench/spawn-loop.mjs in a fresh Node process: spawn() with piped output and a new session, like the supervisor. */
function nodeLoop(n: number, conc: number): { seconds: number; jobsPerSec: number } {
  note('node spawn loop: running in its own process');
  const seconds = Number(
    execFileSync(process.execPath, [join(benchRoot, 'spawn-loop.mjs'), TRUE, String(n), String(conc)])
      .toString()
      .trim(),
  );
  return { seconds: Math.round(seconds * 1000) / 1000, jobsPerSec: Math.round(n / seconds) };
}

function posixSpawnLoop(n: number, conc: number): { seconds: number; jobsPerSec: number } | null {
  if (!existsSync('/usr/bin/cc') && !existsSync('/bin/cc')) return null;
  const dir = mkdtempSync(join(tmpdir(), 'skipjack-bench-spawn-'));
  try {
    const bin = join(dir, 'spawn-true');
    execFileSync('cc', ['-O2', '-o', bin, join(benchRoot, 'spawn-true.c')], { stdio: 'inherit' });
    const seconds = Number(
      execFileSync(bin, [TRUE, String(n), String(conc)])
        .toString()
        .trim(),
    );
    return { seconds: Math.round(seconds * 1000) / 1000, jobsPerSec: Math.round(n / seconds) };
  } catch (err) {
    note(`posix_spawn baseline skipped: ${(err as Error).message}`);
    return null;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function processSpawn(ctx: ScenarioContext): Promise<ScenarioOutput> {
  const n = ctx.quick ? 500 : 2_000;
  const slots = 8;
  const sj = await skipjackRun(ctx, n, slots);
  note(`skipjack: ${sj.jobsPerSec} jobs/s`);
  const nodeRes = nodeLoop(n, slots);
  note(`node loop: ${nodeRes.jobsPerSec} jobs/s`);
  const c = posixSpawnLoop(n, slots);
  if (c) note(`posix_spawn: ${c.jobsPerSec} jobs/s`);
  const peers: ScenarioOutput['peers'] = { 'node-spawn-loop': nodeRes };
  if (c) peers.posix_spawn = c;
  return {
    skipjack: { concurrency: slots, ...sj },
    peers,
    ratios: {
      'jobsPerSec vs node-spawn-loop': ratio(sj.jobsPerSec, nodeRes.jobsPerSec),
      'jobsPerSec vs posix_spawn': c ? ratio(sj.jobsPerSec, c.jobsPerSec) : null,
    },
    notes: [
      `${n} ${TRUE} jobs at concurrency ${slots}. Skipjack: one CLI worker (skipjack worker --slots ${slots}), process executor; min(started_at) to max(finished_at).`,
      'node loop: bench/spawn-loop.mjs in a fresh Node process, child_process.spawn with piped stdout/stderr and detached (a new session), waits for close. posix_spawn: C loop compiled into a temp dir, waitpid(-1).',
    ],
    table: table([
      ['system', 'jobs', 'seconds', 'jobs/s'],
      [`skipjack (cli worker, ${slots} slots)`, sj.jobs, sj.seconds, sj.jobsPerSec],
      [`node spawn loop (${slots} at once)`, n, nodeRes.seconds, nodeRes.jobsPerSec],
      [`posix_spawn C loop (${slots} at once)`, c ? n : null, c?.seconds, c?.jobsPerSec],
    ]),
  };
}

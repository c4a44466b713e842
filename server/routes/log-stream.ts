// A job's output as an answer, read and written a page at a time (each write waits for the
// client to take the last one), so neither a GiB of output nor a slow reader grows memory.
// With several runs a header line marks where each begins; a lost run ends with a line that
// says so (its output stops: it did not end).
import { once } from 'node:events';
import type { Response } from 'express';
import { sql } from 'kysely';
import { terminalStates, type JobState } from '../../protocol/schemas.js';
import type { AppContext } from '../context.js';
import { getJob, listAttempts, type RunRow } from '../store/jobs.js';
import { readLogPage, type LogCursor } from '../store/leases.js';

/** The job's whole output (every run, with headers), or one run's bytes as stored. */
export async function sendLogs(ctx: AppContext, id: number, res: Response, attempt?: number): Promise<void> {
  const whole = attempt === undefined;
  const { rows } = await sql<{ first: number | null; last: number | null }>`
    SELECT min(attempt) AS first, max(attempt) AS last FROM job_logs WHERE job_id = ${id}`.execute(ctx.db);
  const headers = whole && rows[0].first !== rows[0].last;
  const runs = whole ? await listAttempts(ctx.db, id) : [];
  const closed = closedSignal(res);
  let at: LogCursor = { run: attempt ?? 0, offset: 0 };
  let run = -1;
  for (;;) {
    const page = await readLogPage(ctx.db, id, at, { attempt });
    if (page.length === 0 || closed.aborted) break;
    for (const c of page) {
      if (whole && c.attempt !== run) {
        if (run !== -1) await write(res, lostLine(runs, run));
        if (headers) await write(res, `--- run ${c.attempt} ---\n`);
      }
      run = c.attempt;
      await write(res, c.data);
      at = { run: c.attempt, offset: c.byte_offset + c.data.length };
    }
  }
  if (whole && run !== -1) await write(res, lostLine(runs, run));
  res.end();
}

/** Streams output as it is stored, woken by NOTIFY, and ends once the job is finished and drained. */
export async function followLogs(ctx: AppContext, id: number, res: Response): Promise<void> {
  const closed = closedSignal(res);
  let at: LogCursor = { run: 0, offset: 0 };
  res.flushHeaders();
  while (!closed.aborted) {
    const state = (await getJob(ctx.db, id)).state as JobState;
    const page = await readLogPage(ctx.db, id, at);
    for (const c of page) {
      if (c.attempt !== at.run && at.run !== 0)
        await write(res, lostLine(await listAttempts(ctx.db, id), at.run) + `--- run ${c.attempt} ---\n`);
      await write(res, c.data);
      at = { run: c.attempt, offset: c.byte_offset + c.data.length };
    }
    if (terminalStates.includes(state) && page.length === 0) {
      if (at.run !== 0) await write(res, lostLine(await listAttempts(ctx.db, id), at.run));
      break;
    }
    if (page.length === 0)
      await ctx.hub.wait('skipjack_logs', 1000, (p) => p === String(id) || p === 'closing', [closed]);
  }
  res.end();
}

/** The line that ends a lost run's output; '' for any other run. */
function lostLine(runs: RunRow[], attempt: number): string {
  const run = runs.find((r) => r.attempt === attempt);
  if (run?.outcome !== 'lost') return '';
  return `--- run ${attempt} was lost: ${run.error ?? 'its worker went away'}; its output stops here ---\n`;
}

/** Writes, then waits until the client has taken it (or gone). */
async function write(res: Response, data: string | Buffer): Promise<void> {
  if (data.length === 0 || res.write(data) || res.destroyed) return;
  await Promise.race([once(res, 'drain'), once(res, 'close')]);
}

function closedSignal(res: Response): AbortSignal {
  const closed = new AbortController();
  res.on('close', () => closed.abort());
  return closed.signal;
}

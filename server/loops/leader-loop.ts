// A background loop that runs once cluster-wide per tick: each tick takes a transaction-scoped
// advisory lock, so with many server replicas only one does the work, and a crashed leader
// holds nothing. A tick that says it left work behind ('more') is followed at once by another,
// each in its own short transaction, so a backlog is worked off without one long transaction.
import { sql } from 'kysely';
import type { Logger } from 'pino';
import type { Db } from '../db.js';

export interface Loop {
  stop(): Promise<void>;
}

export function startLeaderLoop(
  db: Db,
  log: Logger,
  opts: { name: string; lockKey: number; intervalMs: number; firstTickMs?: number },
  tick: (db: Db) => Promise<void | 'more'>,
): Loop {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const once = async (): Promise<boolean> => {
    try {
      return await db.transaction().execute(async (trx) => {
        const { rows } = await sql<{ ok: boolean }>`SELECT pg_try_advisory_xact_lock(${opts.lockKey}) AS ok`.execute(
          trx,
        );
        return rows[0].ok && (await tick(trx)) === 'more';
      });
    } catch (err) {
      if (!stopped) log.warn({ err: (err as Error).message, loop: opts.name }, 'loop tick failed; retrying next tick');
      return false;
    }
  };
  const schedule = (delayMs = opts.intervalMs) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = once().then((more) => schedule(more ? 0 : opts.intervalMs));
    }, delayMs);
  };
  schedule(opts.firstTickMs ?? opts.intervalMs);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

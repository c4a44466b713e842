// A background loop that runs once cluster-wide per tick: each tick takes a transaction-scoped
// advisory lock, so with many server replicas only one does the work, and a crashed leader
// holds nothing.
import { sql } from 'kysely';
import type { Logger } from 'pino';
import type { Db } from '../db.js';

export interface Loop {
  stop(): Promise<void>;
}

export function startLeaderLoop(
  db: Db,
  log: Logger,
  opts: { name: string; lockKey: number; intervalMs: number },
  tick: (db: Db) => Promise<void>,
): Loop {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const once = async () => {
    try {
      await db.transaction().execute(async (trx) => {
        const { rows } = await sql<{ ok: boolean }>`SELECT pg_try_advisory_xact_lock(${opts.lockKey}) AS ok`.execute(
          trx,
        );
        if (rows[0].ok) await tick(trx);
      });
    } catch (err) {
      if (!stopped) log.warn({ err: (err as Error).message, loop: opts.name }, 'loop tick failed; retrying next tick');
    }
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = once().finally(schedule);
    }, opts.intervalMs);
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

// Named (prepared) statements: parsed and planned once per connection instead of at every call.
// Only for a statement whose cost is mostly its planning, and whose text repeats: the hand-off's
// insert-and-claim of one job spends 0.6-1 ms of its 2.5-3.5 ms there on this VM (bench/ latency).
// A migration that changes a table under a running server changes such a statement's result
// type; PostgreSQL then refuses to run it (0A000), and it is prepared again under a new name.
// (A transaction-mode PgBouncer before 1.21 cannot keep named statements; see the README.)
import { createHash } from 'node:crypto';
import type { CompiledQuery } from 'kysely';
import pg from 'pg';

export class PreparedStatements {
  private generation = 0;

  constructor(private pool: pg.Pool) {}

  async rows<R>(query: CompiledQuery<R>): Promise<R[]> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      for (let retried = false; ; retried = true) {
        const generation = this.generation;
        const name = `skipjack_${generation}_${createHash('sha1').update(query.sql).digest('hex').slice(0, 16)}`;
        try {
          return (await client.query({ name, text: query.sql, values: [...query.parameters] })).rows as R[];
        } catch (err) {
          if (retried || !stalePlan(err)) throw err;
          // Once for all connections, however many saw the change at the same moment.
          if (this.generation === generation) this.generation++;
        }
      }
    } catch (err) {
      // An error PostgreSQL answered leaves the connection fit for use; any other may not.
      if (!(err instanceof pg.DatabaseError)) broken = err as Error;
      throw err;
    } finally {
      client.release(broken);
    }
  }
}

/** The plan of a named statement no longer fits a table it reads. */
const stalePlan = (err: unknown) =>
  err instanceof pg.DatabaseError && err.code === '0A000' && /cached plan must not change result type/.test(err.message);

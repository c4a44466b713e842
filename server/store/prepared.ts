// Named (prepared) statements: parsed and planned once per connection instead of at every call.
// Only for a statement whose cost is mostly its planning, and whose text repeats: the hand-off's
// insert-and-claim of one job spends 0.6-1 ms of its 2.5-3.5 ms there on this VM (bench/ latency).
// A migration that changes a table under a running server changes such a statement's result
// type; PostgreSQL then refuses to run it (0A000), and it is prepared again under a new name.
import { createHash } from 'node:crypto';
import type { CompiledQuery } from 'kysely';
import type pg from 'pg';

export class PreparedStatements {
  private generation = 0;

  constructor(private pool: pg.Pool) {}

  async rows<R>(query: CompiledQuery<R>): Promise<R[]> {
    for (let retried = false; ; retried = true) {
      const name = `skipjack_${this.generation}_${createHash('sha1').update(query.sql).digest('hex').slice(0, 16)}`;
      try {
        return (await this.pool.query({ name, text: query.sql, values: [...query.parameters] })).rows as R[];
      } catch (err) {
        if (retried || !stalePlan(err)) throw err;
        this.generation++;
      }
    }
  }
}

/** "cached plan must not change result type": a table the statement reads has changed. */
const stalePlan = (err: unknown) => (err as { code?: string })?.code === '0A000';

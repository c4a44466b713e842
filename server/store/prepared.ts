// Named (prepared) statements: parsed and planned once per connection instead of at every call.
// Only for a statement whose cost is mostly its planning, and whose text repeats: the hand-off's
// insert-and-claim of one job spends 0.6-1 ms of its 2.5-3.5 ms there on this VM (bench/ latency).
// A migration that changes a table under a running server changes such a statement's result
// type; PostgreSQL then refuses to run it (0A000), and it is prepared again under a new name.
// Behind a pooler that loses named statements between calls (PgBouncer in transaction mode
// before 1.21), they are given up for unnamed ones at the first sign of it.
import { createHash } from 'node:crypto';
import type { CompiledQuery } from 'kysely';
import pg from 'pg';

export class PreparedStatements {
  private generation = 0;
  /** Set once a statement prepared earlier has gone missing: unnamed statements from then on. */
  private unnamed = false;

  /** `onLost` hears, once, that named statements do not last between calls on this pool. */
  constructor(
    private pool: pg.Pool,
    private onLost: (err: Error) => void = () => {},
  ) {}

  async rows<R>(query: CompiledQuery<R>): Promise<R[]> {
    const values = [...query.parameters];
    if (this.unnamed) return (await this.pool.query(query.sql, values)).rows as R[];
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      for (let retried = false; ; retried = true) {
        const generation = this.generation;
        const name = this.nameOf(query.sql, generation);
        try {
          return (await client.query({ name, text: query.sql, values })).rows as R[];
        } catch (err) {
          if (lostStatement(err)) return await this.unnamedFromNowOn(client, query.sql, values, err as Error);
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

  /** A statement's name, by its text: hashed once per text and generation, not at every call. */
  private names = new Map<string, string>();
  private nameOf(text: string, generation: number): string {
    let name = this.names.get(text);
    if (name?.startsWith(`skipjack_${generation}_`)) return name;
    name = `skipjack_${generation}_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`;
    this.names.set(text, name);
    return name;
  }

  /**
   * A pooler in transaction mode (PgBouncer before 1.21, or without max_prepared_statements)
   * sends each call to whichever server connection is free: a statement prepared on one is
   * missing on the next, or already there under its name. Unnamed statements work through it.
   */
  private async unnamedFromNowOn<R>(client: pg.PoolClient, text: string, values: unknown[], err: Error): Promise<R[]> {
    if (!this.unnamed) this.onLost(err);
    this.unnamed = true;
    return (await client.query(text, values)).rows as R[];
  }
}

/** A named statement this connection prepared is not on the server it reached, or another one is there by that name. */
const lostStatement = (err: unknown) =>
  err instanceof pg.DatabaseError && (err.code === '26000' || err.code === '42P05');

/** The plan of a named statement no longer fits a table it reads. */
const stalePlan = (err: unknown) =>
  err instanceof pg.DatabaseError &&
  err.code === '0A000' &&
  /cached plan must not change result type/.test(err.message);

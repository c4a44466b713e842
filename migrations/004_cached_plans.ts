import { sql, type Kysely } from 'kysely';
import { releaseStatement } from './003_lean_claim_and_release.js';

// A LANGUAGE sql function that is not inlined plans its body on every call (PostgreSQL 17 and
// older); plpgsql keeps the plans of its static statements for the session. An empty release
// cost 0.40 ms, of which 0.33 ms was planning its statement (0.09 ms prepared), and the claim
// planned the worker's load on every call. Same statements, same settings, now in plpgsql.
const load = sql`
      SELECT coalesce(sum(j.need_cpu), 0)::int, coalesce(sum(j.need_memory_mb), 0)::int,
             coalesce(sum(j.need_disk_mb), 0)::int, count(*)::int
      FROM jobs j WHERE j.worker_id = p_worker AND j.state IN ('running', 'assigned')`;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION skipjack_worker_load(p_worker uuid, OUT cpu int, OUT memory_mb int, OUT disk_mb int, OUT slots int)
    LANGUAGE plpgsql STABLE AS $fn$
    BEGIN
      ${load} INTO cpu, memory_mb, disk_mb, slots;
    END $fn$;

    CREATE OR REPLACE FUNCTION skipjack_release(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
      p_signals text[], p_errors text[], p_reasons text[])
    RETURNS TABLE (id bigint, state text, runs int, released_by uuid)
    LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
    #variable_conflict use_column
    BEGIN
      RETURN QUERY ${releaseStatement};
    END $fn$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION skipjack_worker_load(p_worker uuid, OUT cpu int, OUT memory_mb int, OUT disk_mb int, OUT slots int)
    LANGUAGE sql STABLE AS $fn$ ${load} $fn$;

    CREATE OR REPLACE FUNCTION skipjack_release(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
      p_signals text[], p_errors text[], p_reasons text[])
    RETURNS TABLE (id bigint, state text, runs int, released_by uuid)
    LANGUAGE sql SET enable_seqscan = off AS $fn$ ${releaseStatement} $fn$;
  `.execute(db);
}

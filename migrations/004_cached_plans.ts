import { sql, type Kysely } from 'kysely';
import { releaseStatement } from './003_lean_claim_and_release.js';

// Plans made once per session, not on every call:
// - a LANGUAGE sql function that is not inlined plans its body on every call (PostgreSQL 17 and
//   older); plpgsql keeps the plans of its static statements. An empty release cost 0.40 ms, of
//   which 0.33 ms was planning; the claim planned the worker's load each time. Same statements,
//   same settings, now in plpgsql;
// - plpgsql still re-plans a statement with parameters while a plan for its values looks
//   cheaper than a generic one, which for these is forever. Generic plans cut a one-job claim
//   from 0.63 to 0.35 ms of execution, and a one-job release with the next claim from 0.75 to
//   0.39 ms (PG 15 log). ANALYZE still replaces cached plans;
// - no JIT: not knowing LIMIT free_slots, the generic plan of the claim's candidates is costed
//   above jit_above_cost at 1,000,000 pending, and compiling it took 200 ms of every claim (bench
//   backlog) for a plan that reads a few index entries: 0.74 ms without. JIT never pays for
//   statements of a few rows, so none of the claim and release functions use it.
const hotFunctions = [
  'skipjack_claim(uuid, int, int)',
  'skipjack_release(bigint[], uuid[], text[], int[], text[], text[], text[])',
  'skipjack_release_and_claim(bigint[], uuid[], text[], int[], text[], text[], text[], uuid, int, int)',
  'skipjack_worker_load(uuid)',
];
const transactionPathFunctions = [
  'skipjack_candidates(workers, text[], int, int, int, int, boolean, bigint)',
  'skipjack_start_leases(uuid, bigint[], int)',
];

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
  for (const fn of hotFunctions) await sql`ALTER FUNCTION ${sql.raw(fn)} SET plan_cache_mode = force_generic_plan SET jit = off`.execute(db);
  for (const fn of transactionPathFunctions) await sql`ALTER FUNCTION ${sql.raw(fn)} SET jit = off`.execute(db);
  // Its generic plan must read the pending index in claim order, as every plan it has ever
  // wanted does; a bitmap scan would gather every claimable job to sort them (a test checks the
  // rows read with statistics of a shuffled backlog).
  await sql`ALTER FUNCTION skipjack_claim(uuid, int, int) SET enable_bitmapscan = off`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER FUNCTION skipjack_claim(uuid, int, int) RESET enable_bitmapscan`.execute(db);
  for (const fn of hotFunctions) await sql`ALTER FUNCTION ${sql.raw(fn)} RESET plan_cache_mode RESET jit`.execute(db);
  for (const fn of transactionPathFunctions) await sql`ALTER FUNCTION ${sql.raw(fn)} RESET jit`.execute(db);
  await sql`
    CREATE OR REPLACE FUNCTION skipjack_worker_load(p_worker uuid, OUT cpu int, OUT memory_mb int, OUT disk_mb int, OUT slots int)
    LANGUAGE sql STABLE AS $fn$ ${load} $fn$;

    CREATE OR REPLACE FUNCTION skipjack_release(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
      p_signals text[], p_errors text[], p_reasons text[])
    RETURNS TABLE (id bigint, state text, runs int, released_by uuid)
    LANGUAGE sql SET enable_seqscan = off AS $fn$ ${releaseStatement} $fn$;
  `.execute(db);
}

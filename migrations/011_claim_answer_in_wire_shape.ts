import { sql, type Kysely } from 'kysely';

// A worker's releases and next claim, answered as one row: the released runs as JSON, and the
// claimed jobs as the JSON text of their wire shape (protocol ClaimedJob), which the server puts
// into its answer unread. Row by row, the server's PostgreSQL client parsed 16 columns of each
// of up to 2,000 rows per request into objects, only to turn them into JSON again.
// Measured (a probe draining 20,000 jobs, 1,000 per call, one connection): the caller's CPU
// 17-18 -> 8.5-10 us per job user and 7.6-7.9 -> 3.0-6.8 system, PostgreSQL's within the noise.
// skipjack_release_and_claim (003) stays, for servers of an older version during an upgrade.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION skipjack_release_and_claim_wire(p_ids bigint[], p_tokens uuid[], p_outcomes text[], p_exit_codes int[],
      p_signals text[], p_errors text[], p_reasons text[], p_worker uuid, p_max int, p_ttl_ms int,
      OUT worker_known boolean, OUT released json, OUT claimed_count int, OUT claimed text)
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
    BEGIN
      -- The worker row first, then job rows, as a heartbeat takes them (see 003).
      PERFORM 1 FROM workers w WHERE w.id = p_worker FOR NO KEY UPDATE;
      worker_known := FOUND;
      SELECT coalesce(json_agg(json_build_object('id', r.id, 'state', r.state, 'runs', r.runs, 'released_by', r.released_by)), '[]')
        INTO released FROM skipjack_release(p_ids, p_tokens, p_outcomes, p_exit_codes, p_signals, p_errors, p_reasons) AS r;
      claimed_count := 0;
      claimed := '[]';
      IF NOT worker_known THEN RETURN; END IF;
      -- server/store/job-view.ts toClaimedJob, key for key (a test compares the two).
      SELECT count(*), coalesce(json_agg(json_build_object('id', c.id, 'queue', c.queue, 'command', c.command, 'env', c.env,
          'secretEnv', c.secret_env, 'cwd', c.cwd, 'timeoutSeconds', c.timeout_seconds, 'killSignal', c.kill_signal,
          'killGraceSeconds', c.kill_grace_seconds, 'outputCapBytes', c.output_cap_bytes, 'restart', c.restart,
          'leaseToken', c.lease_token, 'attempt', c.runs) ORDER BY c.claim_order), '[]')::text
        INTO claimed_count, claimed
        FROM skipjack_claim(p_worker, p_max, p_ttl_ms) WITH ORDINALITY AS c(id, queue, command, env, secret_env, cwd, timeout_seconds,
          kill_signal, kill_grace_seconds, output_cap_bytes, restart, lease_token, runs, claim_order);
    END $fn$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION skipjack_release_and_claim_wire(bigint[], uuid[], text[], int[], text[], text[], text[], uuid, int, int)`.execute(db);
}

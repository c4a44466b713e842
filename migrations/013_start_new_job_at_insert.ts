import { sql, type Kysely } from 'kysely';

// One job's hand-off to a sleeping long-poll starts the job in its insert when it can: the row
// goes in as running, instead of in as pending and then through skipjack_claim, which wrote it a
// second time (a non-HOT update: every index again) and ran the whole claim. It can when the
// worker is active and not locked by a claim or a heartbeat of its own, has room for the job now,
// and no pending job it could claim is due: then the new job is the one its claim would take
// first. Otherwise the statement claims as before. That the job's queue, region and labels suit
// the worker the server checks from the worker's registration, which never changes.
// The statement's round trip on an idle 2-core VM (bench/, 20 ms apart, 250 of each): 2.21 ->
// 1.84 ms; a plain insert of a pending job 1.88 ms (its NOTIFY).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION skipjack_can_start_new(p_worker uuid, p_cpu int, p_memory_mb int, p_disk_mb int) RETURNS boolean
    LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
    DECLARE
      w workers;
    BEGIN
      SELECT * INTO w FROM workers WHERE id = p_worker AND state = 'active' FOR NO KEY UPDATE SKIP LOCKED;
      IF NOT FOUND THEN RETURN false; END IF;
      -- A statement after the lock: its snapshot holds every claim committed before ours.
      RETURN EXISTS (
          SELECT 1 FROM skipjack_worker_load(p_worker) AS l
          WHERE l.slots < w.slots AND l.cpu + p_cpu <= w.cpu AND l.memory_mb + p_memory_mb <= w.memory_mb
            AND l.disk_mb + p_disk_mb <= w.disk_mb)
        -- Any due job of its queues and regions counts, whether it fits or not: then the claim decides.
        AND NOT EXISTS (
          SELECT 1 FROM jobs j
          WHERE j.state = 'pending' AND j.queue = ANY (w.queues) AND j.run_at <= now()
            AND j.region_key = ANY (CASE WHEN w.region IS NULL THEN ARRAY[''] ELSE ARRAY['', '*', w.region] END));
    END $fn$;
    ALTER FUNCTION skipjack_can_start_new(uuid, int, int, int) SET plan_cache_mode = force_generic_plan SET jit = off;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION skipjack_can_start_new(uuid, int, int, int)`.execute(db);
}

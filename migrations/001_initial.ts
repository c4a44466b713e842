import { sql, type Kysely } from 'kysely';

// One migration in raw SQL: the partial indexes and checks matter more than a builder's portability.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE workers (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      name text NOT NULL,
      hostname text,
      region text,
      labels jsonb NOT NULL DEFAULT '{}',
      cpu integer NOT NULL CHECK (cpu >= 0),
      memory_mb integer NOT NULL CHECK (memory_mb >= 0),
      disk_mb integer NOT NULL CHECK (disk_mb >= 0),
      slots integer NOT NULL CHECK (slots >= 1),
      queues text[] NOT NULL DEFAULT '{default}',
      state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining', 'gone')),
      version text,
      registered_at timestamptz NOT NULL DEFAULT now(),
      last_seen_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE jobs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      queue text NOT NULL DEFAULT 'default',
      state text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'assigned', 'running', 'succeeded', 'failed', 'cancelled')),
      command text[] NOT NULL,
      env jsonb NOT NULL DEFAULT '{}',
      secret_env text[] NOT NULL DEFAULT '{}',
      cwd text,
      priority integer NOT NULL DEFAULT 0,
      run_at timestamptz NOT NULL DEFAULT now(),
      -- attempts counts charged tries; runs counts every start, and numbers job_attempts and job_logs.
      attempts integer NOT NULL DEFAULT 0,
      runs integer NOT NULL DEFAULT 0,
      max_attempts integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
      retry_backoff_seconds real NOT NULL DEFAULT 2,
      timeout_seconds real,
      kill_signal text,
      kill_grace_seconds real,
      output_cap_bytes bigint,
      idempotency_key text,
      constraints jsonb,
      preferences jsonb,
      restart jsonb,
      -- Constraints flattened for the claim query, so filters run in SQL.
      regions text[],
      -- NULL: any region; the region itself for a single-region job; '*' for a set (checked against regions).
      region_key text GENERATED ALWAYS AS (
        CASE WHEN regions IS NULL THEN NULL WHEN cardinality(regions) = 1 THEN regions[1] ELSE '*' END) STORED,
      need_cpu integer NOT NULL DEFAULT 0,
      need_memory_mb integer NOT NULL DEFAULT 0,
      need_disk_mb integer NOT NULL DEFAULT 0,
      label_selector jsonb,
      placement_deadline_at timestamptz,
      worker_id uuid REFERENCES workers (id),
      assigned_at timestamptz,
      lease_token uuid,
      lease_expires_at timestamptz,
      cancel_requested boolean NOT NULL DEFAULT false,
      exit_code integer,
      signal text,
      end_reason text,
      error text,
      waiting_reason text,
      created_at timestamptz NOT NULL DEFAULT now(),
      started_at timestamptz,
      finished_at timestamptz,
      CHECK ((state IN ('running', 'assigned')) = (worker_id IS NOT NULL)),
      CHECK ((state = 'running') = (lease_token IS NOT NULL))
    );

    -- The claim path: only pending rows, per queue and region, already in claim order, so jobs
    -- for other regions cost a claim nothing however many of them wait.
    CREATE INDEX jobs_pending_claim_idx ON jobs (queue, region_key, priority DESC, run_at, id) WHERE state = 'pending';
    CREATE INDEX jobs_assigned_idx ON jobs (worker_id, assigned_at) WHERE state = 'assigned';
    CREATE INDEX jobs_placement_deadline_idx ON jobs (placement_deadline_at) WHERE state = 'pending' AND placement_deadline_at IS NOT NULL;
    CREATE UNIQUE INDEX jobs_idempotency_key_idx ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
    -- Capacity accounting and the reaper look only at held jobs.
    CREATE INDEX jobs_held_idx ON jobs (worker_id) WHERE state IN ('running', 'assigned');
    CREATE INDEX jobs_lease_expiry_idx ON jobs (lease_expires_at) WHERE state = 'running';
    CREATE INDEX jobs_state_id_idx ON jobs (state, id);
    -- Retention deletes finished jobs oldest first.
    CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE state IN ('succeeded', 'failed', 'cancelled');

    CREATE TABLE job_attempts (
      job_id bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
      attempt integer NOT NULL, -- the job's run number
      worker_id uuid REFERENCES workers (id),
      started_at timestamptz NOT NULL DEFAULT now(),
      ended_at timestamptz,
      outcome text,
      end_reason text,
      exit_code integer,
      signal text,
      error text,
      PRIMARY KEY (job_id, attempt)
    );

    CREATE TABLE job_logs (
      job_id bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
      attempt integer NOT NULL,
      byte_offset bigint NOT NULL,
      stream text NOT NULL,
      data bytea NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (job_id, attempt, byte_offset)
    );

    ${notifyTriggers}
  `.execute(db);
}

// Wake long-polling claimers. The payload is the epoch millisecond (rounded down) the job becomes
// due, so a listener can arm a timer for a delayed job; identical payloads in one transaction fold
// into one. (Migration 007 replaces these, and its down puts a frozen copy back.)
const notifyTriggers = sql`
    CREATE FUNCTION skipjack_notify_pending() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('skipjack_jobs', NEW.queue || ' ' || floor(extract(epoch FROM NEW.run_at) * 1000)::bigint::text);
      RETURN NULL;
    END $$;
    CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs
      FOR EACH ROW WHEN (NEW.state = 'pending') EXECUTE FUNCTION skipjack_notify_pending();
    CREATE TRIGGER jobs_notify_update AFTER UPDATE OF state ON jobs
      FOR EACH ROW WHEN (NEW.state = 'pending' AND OLD.state <> 'pending') EXECUTE FUNCTION skipjack_notify_pending();`;

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE job_logs; DROP TABLE job_attempts; DROP TABLE jobs; DROP TABLE workers;
    DROP FUNCTION skipjack_notify_pending();
  `.execute(db);
}

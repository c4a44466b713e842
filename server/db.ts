// Connection, schema types and migration runner.
import pg from 'pg';
import { Kysely, Migrator, PostgresDialect, type Generated, type ColumnType, type Selectable } from 'kysely';
import { migrations } from '../migrations/index.js';
import { installLiveSql } from './sql/index.js';

// int8 ids and counts fit in a JS number for any realistic job table.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type DefaultTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface WorkersTable {
  id: Generated<string>;
  name: string;
  hostname: string | null;
  region: string | null;
  labels: ColumnType<Record<string, string>, string, string>;
  cpu: number;
  memory_mb: number;
  disk_mb: number;
  slots: number;
  queues: string[];
  state: Generated<'active' | 'draining' | 'gone' | 'deregistered'>;
  version: string | null;
  /** sha256 (hex) of the key the registration returned (migration 009); null for older workers. */
  key_sha256: string | null;
  /** A drain was asked (migration 011): a gone worker that heartbeats again comes back draining. */
  drain_asked: Generated<boolean>;
  registered_at: DefaultTimestamp;
  last_seen_at: DefaultTimestamp;
}

export interface JobsTable {
  id: Generated<number>;
  queue: Generated<string>;
  state: Generated<string>;
  command: string[];
  env: ColumnType<Record<string, string>, string, string>;
  secret_env: Generated<string[]>;
  cwd: string | null;
  priority: Generated<number>;
  run_at: DefaultTimestamp;
  attempts: Generated<number>;
  runs: Generated<number>;
  max_attempts: Generated<number>;
  retry_backoff_seconds: Generated<number>;
  timeout_seconds: number | null;
  kill_signal: string | null;
  kill_grace_seconds: number | null;
  output_cap_bytes: number | null;
  idempotency_key: string | null;
  constraints: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  preferences: ColumnType<unknown[] | null, string | null, string | null>;
  restart: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  regions: string[] | null;
  region_key: Generated<string>;
  need_cpu: Generated<number>;
  need_memory_mb: Generated<number>;
  need_disk_mb: Generated<number>;
  label_selector: ColumnType<Record<string, string[]> | null, string | null, string | null>;
  placement_deadline_at: Timestamp | null;
  worker_id: string | null;
  /** The worker of the last run that ended (migration 008). */
  last_worker_id: Generated<string | null>;
  assigned_at: Timestamp | null;
  lease_token: string | null;
  lease_expires_at: Timestamp | null;
  cancel_requested: Generated<boolean>;
  exit_code: number | null;
  signal: string | null;
  end_reason: string | null;
  error: string | null;
  waiting_reason: string | null;
  created_at: DefaultTimestamp;
  started_at: Timestamp | null;
  finished_at: Timestamp | null;
}

export interface JobAttemptsTable {
  job_id: number;
  attempt: number;
  worker_id: string | null;
  started_at: DefaultTimestamp;
  ended_at: Timestamp | null;
  outcome: string | null;
  end_reason: string | null;
  exit_code: number | null;
  signal: string | null;
  error: string | null;
}

export interface JobLogsTable {
  job_id: number;
  attempt: number;
  byte_offset: number;
  stream: string;
  data: Buffer;
  created_at: DefaultTimestamp;
}

export interface Database {
  workers: WorkersTable;
  jobs: JobsTable;
  job_attempts: JobAttemptsTable;
  job_logs: JobLogsTable;
}

export type Db = Kysely<Database>;
export type JobRow = Selectable<JobsTable>;
export type WorkerRow = Selectable<WorkersTable>;
/** The columns a claim answers with: skipjack_claim returns only these, in claim order. */
export const claimColumns = [
  'id',
  'queue',
  'command',
  'env',
  'secret_env',
  'cwd',
  'timeout_seconds',
  'kill_signal',
  'kill_grace_seconds',
  'output_cap_bytes',
  'restart',
  'lease_token',
  'runs',
] as const;
export type ClaimRow = Pick<JobRow, (typeof claimColumns)[number]>;

/** Bounds on the pool's waits: a statement (0: none) and a connection's opening. */
export interface DbTimeouts {
  statementMs: number;
  connectMs: number;
}

export function createDb(
  connectionString: string,
  poolSize = 10,
  applicationName = 'skipjack',
  timeouts: DbTimeouts = { statementMs: 0, connectMs: 0 },
): { db: Db; pool: pg.Pool } {
  const pool = new pg.Pool({
    connectionString,
    max: poolSize,
    application_name: applicationName,
    // Sent at connect: a statement stuck behind a lock, or a plan gone wrong, ends as a 503.
    ...(timeouts.statementMs > 0 ? { statement_timeout: timeouts.statementMs } : {}),
    connectionTimeoutMillis: timeouts.connectMs,
    keepAlive: true,
  });
  // An idle client that loses its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  return { db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }), pool };
}

/** The versioned migrations, then the live SQL of server/sql/ (which a migration may have replaced). */
export async function migrateToLatest<DB>(db: Kysely<DB>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  const ran = (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
  await installLiveSql(db, { force: ran.length > 0 });
  return ran;
}

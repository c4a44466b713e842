import { parseTokens, type TokenTable } from './auth.js';
import { readPlacementSpec } from './placement/settings.js';

// Server settings, from the environment; every one has a default that works on a laptop.
export interface ServerConfig {
  port: number;
  host: string;
  databaseUrl: string;
  /** A statement running longer is cancelled (SKIPJACK_STATEMENT_TIMEOUT_MS; 0: none). Migrations have none. */
  statementTimeoutMs: number;
  /** Opening a database connection may take this long (SKIPJACK_DB_CONNECT_TIMEOUT_MS). */
  dbConnectTimeoutMs: number;
  /** The schedule loop looks for schedules added elsewhere at least this often (SKIPJACK_SCHEDULE_POLL_MS). */
  schedulePollMs: number;
  /** The LISTEN connection's own URL (SKIPJACK_LISTEN_URL), for a DATABASE_URL through a pooler in transaction mode. */
  listenUrl: string;
  /** How often the LISTEN connection is asked a query, to find a half-open one (SKIPJACK_LISTEN_PROBE_MS). */
  listenProbeMs: number;
  /** How long a lease lives without a heartbeat. Workers heartbeat every third of it. */
  leaseTtlMs: number;
  reaperIntervalMs: number;
  /** A worker silent this long is marked gone and stops counting as capacity. */
  workerGoneAfterMs: number;
  /** An active worker silent this long (two and a half heartbeat intervals) shows as unresponsive and fits no job in `why`. */
  workerUnresponsiveMs: number;
  /** Longest long-poll a claimer may ask for. */
  maxWaitMs: number;
  logLevel: string;
  /** Finished jobs (with their runs and output) are deleted this long after they end; 0 keeps them. */
  retentionMs: number;
  /** Rows of workers gone or deregistered this long are deleted; 0 keeps them. */
  workerRetentionMs: number;
  /** Placement settings as JSON (see server/placement/settings.ts); SKIPJACK_PLACEMENT. */
  placement: unknown;
  /** Overrides the settings' default mode: --placement pull|central. */
  placementMode?: 'pull' | 'central';
  /** Bearer tokens with scopes (SKIPJACK_TOKENS); none configured means no authentication. */
  tokens: TokenTable;
  /** On a stop, how long requests still being answered may take before their connections are cut. */
  stopGraceMs: number;
}

const num = (v: string | undefined, fallback: number) => (v === undefined || v === '' ? fallback : Number(v));

export function configFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  overrides: Partial<ServerConfig> = {},
): ServerConfig {
  const leaseTtlMs = num(env.SKIPJACK_LEASE_TTL_MS, 30_000);
  const config: ServerConfig = {
    port: num(env.PORT, 7070),
    host: env.HOST ?? '127.0.0.1',
    databaseUrl: env.DATABASE_URL ?? '',
    statementTimeoutMs: num(env.SKIPJACK_STATEMENT_TIMEOUT_MS, 60_000),
    dbConnectTimeoutMs: num(env.SKIPJACK_DB_CONNECT_TIMEOUT_MS, 10_000),
    schedulePollMs: num(env.SKIPJACK_SCHEDULE_POLL_MS, 10_000),
    listenUrl: env.SKIPJACK_LISTEN_URL ?? '',
    listenProbeMs: num(env.SKIPJACK_LISTEN_PROBE_MS, 15_000),
    leaseTtlMs,
    reaperIntervalMs: num(env.SKIPJACK_REAPER_INTERVAL_MS, 5_000),
    workerGoneAfterMs: num(env.SKIPJACK_WORKER_GONE_MS, leaseTtlMs * 3),
    workerUnresponsiveMs: num(env.SKIPJACK_WORKER_UNRESPONSIVE_MS, Math.round((leaseTtlMs * 5) / 6)),
    maxWaitMs: num(env.SKIPJACK_MAX_WAIT_MS, 60_000),
    logLevel: env.LOG_LEVEL ?? 'info',
    retentionMs: num(env.SKIPJACK_RETENTION_HOURS, 7 * 24) * 3_600_000,
    workerRetentionMs: num(env.SKIPJACK_WORKER_RETENTION_HOURS, 24) * 3_600_000,
    placement: readPlacementSpec(env.SKIPJACK_PLACEMENT),
    tokens: parseTokens(env.SKIPJACK_TOKENS),
    stopGraceMs: num(env.SKIPJACK_STOP_GRACE_MS, 2_000),
    ...overrides,
  };
  for (const [k, v] of Object.entries(config)) {
    if (typeof v === 'object') continue;
    if (typeof v === 'number' && !(Number.isFinite(v) && v >= 0))
      throw new Error(`config ${k}: expected a non-negative number, got ${v}`);
  }
  return config;
}

// Row → wire shape.
import { performance } from 'node:perf_hooks';
import type { ClaimedJob, JobView, RunView } from '../../protocol/types.js';
import type { EndReason, JobState } from '../../protocol/schemas.js';
import type { ClaimRow, JobRow } from '../db.js';
import type { RunRow } from './jobs.js';
import { heldMs, leaseAgeMs } from './lease-age.js';

const iso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString());

export function toJobView(row: JobRow): JobView {
  return {
    id: row.id,
    queue: row.queue,
    state: row.state as JobState,
    command: row.command,
    env: redactEnv(row.env, row.secret_env),
    cwd: row.cwd,
    priority: row.priority,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    runAt: iso(row.run_at)!,
    createdAt: iso(row.created_at)!,
    startedAt: iso(row.started_at),
    finishedAt: iso(row.finished_at),
    timeoutSeconds: row.timeout_seconds,
    exitCode: row.exit_code,
    signal: row.signal,
    endReason: row.end_reason as EndReason | null,
    error: row.error,
    workerId: row.worker_id,
    leaseExpiresAt: iso(row.lease_expires_at),
    cancelRequested: row.cancel_requested,
    idempotencyKey: row.idempotency_key,
    constraints: row.constraints,
    waitingReason: row.state === 'pending' ? row.waiting_reason : null,
  };
}

/**
 * A claim's answer: its jobs, each with its lease's age, and how long the server had the request
 * (`arrivedAt`, leaseClock()). Both are read at the same moment, which the worker needs.
 */
export function toClaimAnswer(rows: ClaimRow[], arrivedAt: number): { jobs: ClaimedJob[]; serverMs: number } {
  const now = performance.now();
  return { jobs: rows.map((row) => toClaimedJob(row, now)), serverMs: heldMs(arrivedAt, now) };
}

/** The claimant gets what it needs to run the job, secrets included; nobody else sees them. */
export function toClaimedJob(row: ClaimRow, now = performance.now()): ClaimedJob {
  const age = leaseAgeMs(row, now);
  return {
    id: row.id,
    queue: row.queue,
    command: row.command,
    env: row.env,
    secretEnv: row.secret_env,
    cwd: row.cwd,
    timeoutSeconds: row.timeout_seconds,
    killSignal: row.kill_signal,
    killGraceSeconds: row.kill_grace_seconds,
    outputCapBytes: row.output_cap_bytes,
    restart: row.restart,
    leaseToken: row.lease_token!,
    attempt: row.runs,
    ...(age === undefined ? {} : { leaseAgeMs: age }),
  };
}

function redactEnv(env: Record<string, string>, secret: string[]): Record<string, string> {
  if (secret.length === 0) return env;
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, secret.includes(k) ? '***' : v]));
}

export function toRunView(row: RunRow): RunView {
  return {
    attempt: row.attempt,
    workerId: row.worker_id,
    startedAt: iso(row.started_at)!,
    endedAt: iso(row.ended_at),
    outcome: row.outcome,
    endReason: row.end_reason as EndReason | null,
    exitCode: row.exit_code,
    signal: row.signal,
    error: row.error,
  };
}

// The wire API's response shapes.
import type { EndReason, JobState } from './schemas.js';

export interface JobView {
  id: number;
  queue: string;
  state: JobState;
  command: string[];
  env: Record<string, string>;
  cwd: string | null;
  priority: number;
  attempts: number;
  maxAttempts: number;
  runAt: string;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  timeoutSeconds: number | null;
  exitCode: number | null;
  signal: string | null;
  endReason: EndReason | null;
  error: string | null;
  workerId: string | null;
  leaseExpiresAt: string | null;
  cancelRequested: boolean;
  idempotencyKey: string | null;
  constraints: Record<string, unknown> | null;
  /** Why a pending job is not running yet, when the server knows. */
  waitingReason: string | null;
}

/** What a worker needs to run a job it claimed, and no more: claims carry hundreds of these. */
export interface ClaimedJob {
  id: number;
  queue: string;
  command: string[];
  env: Record<string, string>;
  /** Names of env entries whose values are secret: the worker redacts them from logs. */
  secretEnv: string[];
  cwd: string | null;
  timeoutSeconds: number | null;
  killSignal: string | null;
  killGraceSeconds: number | null;
  outputCapBytes: number | null;
  restart: Record<string, unknown> | null;
  leaseToken: string;
  /** The run number: 1 for the first run, counting retries and restarts. */
  attempt: number;
  /**
   * At most how long before the answer was sent the lease began (or was last extended), by the
   * server's clock. Absent from older servers: the worker then dates the lease from its request.
   */
  leaseAgeMs?: number;
}

/** How long the server had a request before answering it (a long-poll's wait included). */
export interface ServerTime {
  /** With it, the worker bounds the answer's trip by the round trip less this (worker/lease-clock.ts). */
  serverMs?: number;
}

export interface WorkerView {
  id: string;
  name: string;
  hostname: string | null;
  region: string | null;
  labels: Record<string, string>;
  capacity: { cpu: number; memoryMb: number; diskMb: number; slots: number };
  allocated: { cpu: number; memoryMb: number; diskMb: number; slots: number };
  queues: string[];
  /** unresponsive: active, but no heartbeat for a couple of intervals (killed, paused or cut off). */
  state: 'active' | 'draining' | 'gone' | 'deregistered' | 'unresponsive';
  lastSeenAt: string;
  registeredAt: string;
}

export interface RegisterResponse {
  id: string;
  /** Proves this worker is itself where a worker token alone is not enough: its deregistration (X-Worker-Key). */
  workerKey: string;
  leaseTtlMs: number;
  heartbeatIntervalMs: number;
  /** The server holds a heartbeat that asks it to (waitMs) until a cancel or a drain is for this worker. */
  heartbeatWaits?: boolean;
}

export interface WorkerHeartbeatResponse {
  /** Jobs whose cancel was requested: the worker kills them and releases them as cancelled. */
  cancel: number[];
  /** Leases the worker no longer holds: it must stop reporting for these. */
  lost: number[];
  /** The operator asked this worker to drain. */
  drain: boolean;
  /**
   * An operator deregistered this worker: every lease it named is lost and `drain` is set, so
   * that a worker of any version stops those jobs and stops.
   */
  deregistered?: true;
  /** At most how long before the answer was sent the named leases were extended; see ClaimedJob. */
  leaseAgeMs?: number;
  serverMs?: number;
}

export interface ApiError {
  error: string;
  message: string;
  issues?: { path: string; message: string }[];
}

/** GET /jobs/:id/placement: every live worker's verdict on the job, as of now. */
export interface PlacementExplanation {
  jobId: number;
  state: string;
  mode: 'pull' | 'central';
  summary: string;
  /** The worker central scheduling would pick now (in pull mode: the best-ranked that fits). */
  bestWorkerId: string | null;
  verdicts: PlacementVerdict[];
}

/** One worker's verdict on the job: why it was rejected, or how it scored (placement's Verdict is this type). */
export interface PlacementVerdict {
  workerId: string;
  workerName: string;
  fits: boolean;
  /** The first filter that rejected the worker. */
  filter?: string;
  reason?: string;
  /** Each ranker's score, 0..100, by ranker name. */
  scores?: Record<string, number>;
  /** Weighted mean of the scores, 0..100. */
  total?: number;
}

/** One run of a job, as GET /jobs/:id/attempts lists them (the run in progress has no end yet). */
export interface RunView {
  /** The job's run number, from 1. */
  attempt: number;
  workerId: string | null;
  startedAt: string;
  endedAt: string | null;
  /** succeeded, failed, cancelled, requeue, restarted or lost; null while it runs. */
  outcome: string | null;
  endReason: EndReason | null;
  exitCode: number | null;
  signal: string | null;
  error: string | null;
}

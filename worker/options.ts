// How a worker agent is set up: what it tells the server at registration, and how it claims,
// runs and drains.
import type { Logger } from 'pino';

export interface WorkerOptions {
  serverUrl: string;
  name?: string;
  region?: string;
  labels?: Record<string, string>;
  capacity?: { cpu?: number; memoryMb?: number; diskMb?: number; slots?: number };
  queues?: string[];
  /** Executable patterns jobs may start; empty allows any. */
  allow?: string[];
  /**
   * 'process' runs each job as a supervised child process. 'noop' only reports success without
   * running anything: it exists for benchmarks of the queue path, never for real work.
   */
  executor?: 'process' | 'noop';
  /**
   * Start job processes through the spawn helper (spawn-helper.py, python3 with vfork), which
   * starts them about three times as fast as this process can. Without python3 the worker forks
   * them itself, with a warning. Default true.
   */
  spawnHelper?: boolean;
  /** Longest long-poll per claim request. */
  pollWaitMs?: number;
  /**
   * With jobs still running, how long a freed slot may wait for the others before the worker
   * claims for it: short jobs then share a claim's round trip instead of paying one each. 0 claims
   * at once. Default 10; at most a quarter of the heartbeat interval.
   */
  claimGatherMs?: number;
  /** On a graceful stop, how long running jobs may take before they are stopped and requeued. */
  drainTimeoutMs?: number;
  token?: string;
  log: Logger;
}

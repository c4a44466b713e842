// The worker agent: register, long-poll for jobs, run each as a supervised process, ship its
// output, heartbeat its leases, release it with its outcome, and drain on request.
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { UnreachableError, SkipjackClient } from '../protocol/client.js';
import type { Release } from '../protocol/schemas.js';
import type { ClaimedJob } from '../protocol/types.js';
import { checkAllowed } from './allowlist.js';
import { Backoff, sleep } from './backoff.js';
import { LogShipper } from './log-shipper.js';
import { ReleaseBatcher } from './release-batcher.js';
import { redactor } from './redact.js';
import { superviseProcess, type ProcessResult, type SupervisedProcess } from './supervisor.js';

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
  /** Longest long-poll per claim request. */
  pollWaitMs?: number;
  /** On a graceful stop, how long running jobs may take before they are stopped and requeued. */
  drainTimeoutMs?: number;
  token?: string;
  log: Logger;
}

interface RunningJob {
  job: ClaimedJob;
  proc: SupervisedProcess;
  shipper: LogShipper;
  leaseLost: boolean;
  done: Promise<void>;
}

export class WorkerAgent {
  readonly client: SkipjackClient;
  private id = '';
  private heartbeatMs = 10_000;
  private running = new Map<number, RunningJob>();
  private draining = false;
  private stopClaiming = new AbortController();
  private slotFreed: (() => void) | null = null;
  private loops: Promise<void>[] = [];
  private log: Logger;
  private stopped = false;
  private stopHeartbeat = new AbortController();
  private shutdownPromise: Promise<void> | null = null;
  private releases: ReleaseBatcher;

  constructor(private opts: WorkerOptions) {
    this.client = new SkipjackClient({ baseUrl: opts.serverUrl, token: opts.token });
    this.log = opts.log;
    this.releases = new ReleaseBatcher(this.client, (err, delay) =>
      this.log.warn({ err: err.message, retryInMs: Math.round(delay) }, 'release failed; retrying'));
  }

  get workerId(): string {
    return this.id;
  }

  get slots(): number {
    return this.opts.capacity?.slots ?? 4;
  }

  get runningJobIds(): number[] {
    return [...this.running.keys()];
  }

  async start(): Promise<void> {
    await this.register();
    this.loops = [this.claimLoop(), this.heartbeatLoop()];
  }

  private async register(): Promise<void> {
    const backoff = new Backoff(200, 5000);
    for (;;) {
      try {
        const o = this.opts;
        const answer = await this.client.register({
          name: o.name ?? hostname(),
          hostname: hostname(),
          region: o.region,
          labels: o.labels ?? {},
          capacity: { cpu: 1000, memoryMb: 1024, diskMb: 10_240, slots: 4, ...o.capacity },
          queues: o.queues ?? ['default'],
        });
        this.id = answer.id;
        this.heartbeatMs = answer.heartbeatIntervalMs;
        this.log = this.opts.log.child({ workerId: this.id });
        this.log.info({ server: this.client.baseUrl, slots: this.slots }, 'worker registered');
        return;
      } catch (err) {
        if (!(err instanceof UnreachableError)) throw err;
        const delay = backoff.next();
        this.log.warn({ err: err.message, retryInMs: Math.round(delay) }, 'server unreachable; retrying registration');
        await sleep(delay, this.stopClaiming.signal);
        if (this.draining) throw new Error('stopped before the worker could register');
      }
    }
  }

  private async claimLoop(): Promise<void> {
    const backoff = new Backoff(100, 5000);
    while (!this.draining) {
      const free = this.slots - this.running.size;
      if (free <= 0) {
        await new Promise<void>((r) => (this.slotFreed = r));
        continue;
      }
      try {
        const { jobs } = await this.client.claim(this.id, free, this.opts.pollWaitMs ?? 30_000, this.stopClaiming.signal);
        backoff.reset();
        for (const job of jobs) this.startJob(job);
      } catch (err) {
        if (this.draining) break;
        const delay = backoff.next();
        this.log.warn({ err: (err as Error).message, retryInMs: Math.round(delay) }, 'claim failed; retrying');
        await sleep(delay, this.stopClaiming.signal);
      }
    }
  }

  private startJob(job: ClaimedJob): void {
    const log = this.log.child({ jobId: job.id, attempt: job.attempt });
    const redact = redactor(job.secretEnv.map((k) => job.env[k] ?? ''));
    log.info({ command: redact(job.command.join(' ')) }, 'job started');
    const entry = { job, leaseLost: false } as RunningJob;
    entry.shipper = new LogShipper(
      this.client, job.id, job.leaseToken,
      () => this.onLeaseLost(entry, log),
      (err) => log.warn({ err: err.message }, 'server refused job output; dropping it'),
    );
    const refusal = checkAllowed(job.command, this.opts.allow ?? [], { cwd: job.cwd ?? undefined, pathEnv: job.env.PATH });
    entry.proc = refusal ? refusedProcess(refusal) : this.opts.executor === 'noop' ? noopProcess() : superviseProcess(
      {
        command: job.command,
        env: job.env,
        cwd: job.cwd ?? undefined,
        timeoutSeconds: job.timeoutSeconds ?? undefined,
        killSignal: (job.killSignal ?? undefined) as NodeJS.Signals | undefined,
        killGraceSeconds: job.killGraceSeconds ?? undefined,
        outputCapBytes: job.outputCapBytes ?? undefined,
      },
      (chunk) => entry.shipper.push(chunk),
    );
    this.running.set(job.id, entry);
    entry.done = this.finishJob(entry, log).finally(() => {
      this.running.delete(job.id);
      this.slotFreed?.();
    });
  }

  private async finishJob(entry: RunningJob, log: Logger): Promise<void> {
    const result = await entry.proc.done;
    await entry.shipper.flush();
    if (entry.leaseLost) return void log.warn({ reason: result.reason }, 'job ended after its lease was lost; not releasing');
    const release = toRelease(entry.job.leaseToken, result);
    log.info({ outcome: release.outcome, reason: result.reason, exitCode: result.exitCode, signal: result.signal, ms: Math.round(result.durationMs) }, 'job ended');
    const answer = await this.releases.release(entry.job.id, release);
    if (!answer.ok) log.warn({ err: answer.message }, 'release refused; the lease was lost meanwhile');
  }

  private onLeaseLost(entry: RunningJob, log: Logger) {
    if (entry.leaseLost) return;
    entry.leaseLost = true;
    log.warn('lease lost (expired or reclaimed); stopping the job');
    entry.proc.stop('cancelled');
  }

  private async heartbeatLoop(): Promise<void> {
    while (!this.stopped) {
      await sleep(this.heartbeatMs, this.stopHeartbeat.signal);
      if (this.stopped) break;
      await this.heartbeat();
    }
  }

  private async heartbeat(): Promise<void> {
    const leases = [...this.running.values()].filter((r) => !r.leaseLost).map((r) => ({ jobId: r.job.id, leaseToken: r.job.leaseToken }));
    try {
      const answer = await this.client.workerHeartbeat(this.id, leases);
      for (const id of answer.cancel) {
        const entry = this.running.get(id);
        if (entry) {
          this.log.info({ jobId: id }, 'cancel requested; stopping the job');
          entry.proc.cancel();
        }
      }
      for (const id of answer.lost) {
        const entry = this.running.get(id);
        if (entry) this.onLeaseLost(entry, this.log.child({ jobId: id }));
      }
      if (answer.drain && !this.draining) {
        this.log.info('server asked this worker to drain');
        void this.shutdown();
      }
    } catch (err) {
      // Running jobs keep running: the lease TTL gives the server time to come back.
      this.log.warn({ err: (err as Error).message }, 'heartbeat failed; jobs keep running');
    }
  }

  /**
   * Graceful stop: claim nothing more, let running jobs finish for up to drainTimeoutMs, then stop
   * the rest and requeue them (no attempt charged), and deregister. Called twice, it stops at once.
   */
  shutdown(): Promise<void> {
    if (this.shutdownPromise) {
      this.stopAll();
      return this.shutdownPromise;
    }
    this.draining = true;
    this.stopClaiming.abort();
    this.slotFreed?.();
    this.log.info({ running: this.running.size }, 'draining: no new claims; waiting for running jobs');
    this.shutdownPromise = this.drain();
    return this.shutdownPromise;
  }

  /** Stops every running job now; each is released as requeue. */
  stopAll(): void {
    for (const entry of this.running.values()) entry.proc.stop('shutdown');
  }

  private async drain(): Promise<void> {
    const all = () => Promise.all([...this.running.values()].map((r) => r.done));
    const timeout = this.opts.drainTimeoutMs ?? 60_000;
    const timer = setTimeout(() => {
      this.log.warn({ running: this.running.size }, 'drain timeout; stopping the remaining jobs and requeueing them');
      this.stopAll();
    }, timeout);
    await all();
    clearTimeout(timer);
    this.stopped = true;
    this.stopHeartbeat.abort();
    await Promise.all(this.loops);
    if (this.id) await this.client.deregister(this.id).catch((err) => this.log.warn({ err: err.message }, 'deregister failed'));
    this.log.info('worker stopped');
  }
}

function toRelease(leaseToken: string, r: ProcessResult): Release {
  const base = { leaseToken, exitCode: r.exitCode, signal: r.signal, error: r.error ?? null };
  switch (r.reason) {
    case 'exited':
      return { ...base, outcome: r.exitCode === 0 ? 'succeeded' : 'failed', reason: 'exited' };
    case 'cancelled':
      return { ...base, outcome: 'cancelled', reason: 'cancelled' };
    case 'shutdown':
      return { ...base, outcome: 'requeue', reason: 'cancelled' };
    case 'timed_out':
      return { ...base, outcome: 'failed', reason: 'timed_out', error: r.error ?? 'timed out' };
    case 'spawn_failed':
      return { ...base, outcome: 'failed', reason: r.error?.startsWith('refused:') ? 'refused' : 'spawn_failed' };
  }
}

function endedProcess(result: Partial<ProcessResult>): SupervisedProcess {
  const full: ProcessResult = {
    reason: 'exited', exitCode: 0, signal: null, warnings: [], outputBytes: 0, droppedBytes: 0, truncated: false, durationMs: 0, ...result,
  };
  return { pid: undefined, done: Promise.resolve(full), cancel() {}, stop() {} };
}

/** A job the allowlist refuses never starts; it ends like a failed spawn, with the reason. */
const refusedProcess = (reason: string) => endedProcess({ reason: 'spawn_failed', exitCode: null, error: `refused: ${reason}` });

/** The benchmark executor: success at once, nothing run. */
const noopProcess = () => endedProcess({});

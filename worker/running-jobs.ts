// The jobs running on this worker, each a JobRun, and the lease tokens of runs that ended here
// unreleased: what the claim loop counts room by, the heartbeat names, and the drain waits on.
import type { ClaimedJob } from '../protocol/types.js';
import { JobRun, type JobRunDeps } from './job-run.js';
import { killByForLease } from './lease-clock.js';
import { lazyChild } from './lazy-log.js';
import { redactor } from './redact.js';
import type { Registration } from './registration.js';
import type { Launcher } from './spawner.js';

export interface RunningJobsDeps extends Omit<JobRunDeps, 'launch' | 'log'> {
  /** How job processes are started, asked at each start: the spawn helper may have failed to start. */
  launch(): Launcher | undefined;
  worker: Readonly<Pick<Registration, 'log' | 'leaseTtlMs'>>;
  /** A run ended, released or not: its slot is free. */
  onEnded(): void;
  /**
   * When every job here must be dead by unless a lease is extended first (null: no job runs).
   * The spawn helper kills them then by itself: a worker paused (SIGSTOP) or starved cannot.
   */
  armDeadline(killAllBy: number | null): void;
}

export class RunningJobs {
  /**
   * Each run in progress, and its whole run (release included), which the drain waits on. By lease
   * token, not job id: a job whose lease was lost can be claimed here again while its old process
   * still has its kill grace, and both hold a slot until they end.
   */
  private running = new Map<string, { run: JobRun; done: Promise<void> }>();
  /** Lease token → when its run ended here without a release the server took. */
  private unreleased = new Map<string, number>();

  constructor(private deps: RunningJobsDeps) {}

  get size(): number {
    return this.running.size;
  }

  get runs(): JobRun[] {
    return [...this.running.values()].map(({ run }) => run);
  }

  get jobIds(): number[] {
    return this.runs.map((run) => run.job.id);
  }

  /** Whether a run under this lease token is running here, or ended here unreleased. */
  ranHere(leaseToken: string): boolean {
    return this.running.has(leaseToken) || this.unreleased.has(leaseToken);
  }

  /** The run of this job whose lease is still held here: the one a heartbeat names. */
  heldRun(jobId: number): JobRun | undefined {
    for (const { run } of this.running.values()) if (run.job.id === jobId && !run.leaseLost) return run;
    return undefined;
  }

  anyStopping(): boolean {
    return [...this.running.values()].some(({ run }) => run.stopping);
  }

  /** Resolves once every run running now has ended, released or not. */
  allDone(): Promise<unknown> {
    return Promise.all([...this.running.values()].map((r) => r.done));
  }

  /** Stops every running job now; each is released as requeue. */
  stopAll(): void {
    for (const { run } of this.running.values()) run.stop('shutdown');
  }

  /** The server no longer holds this worker's leases: every job stops, and none is released. */
  stopUnreleased(): void {
    for (const { run } of this.running.values()) run.onLeaseLost();
  }

  start(job: ClaimedJob, claimSentAt: number): void {
    const workerLog = this.deps.worker.log;
    const log = lazyChild(workerLog, { jobId: job.id, attempt: job.attempt });
    if (workerLog.isLevelEnabled('info')) {
      const redact = redactor(job.secretEnv.map((k) => job.env[k] ?? ''));
      log.info({ command: redact(job.command.join(' ')) }, 'job started');
    }
    const { client, releases, allow, executor } = this.deps;
    const run = new JobRun(job, { client, releases, allow, executor, launch: this.deps.launch(), log }, claimSentAt);
    const done = run.run().then(
      () => this.ended(run),
      (err) => {
        log.error({ err }, 'job run failed unexpectedly; its lease will expire');
        this.ended(run);
      },
    );
    this.running.set(job.leaseToken, { run, done });
    this.leasesChanged();
  }

  /** A lease began, was extended, or ended: the earliest end moves the spawn helper's deadline. */
  leasesChanged(): void {
    let earliest: number | null = null;
    // A run whose lease is lost counts too: past its lease's end it may run elsewhere.
    for (const { run } of this.running.values())
      if (earliest === null || run.leaseExtendedAt < earliest) earliest = run.leaseExtendedAt;
    this.deps.armDeadline(earliest === null ? null : killByForLease(earliest, this.deps.worker.leaseTtlMs));
  }

  private ended(run: JobRun): void {
    this.running.delete(run.job.leaseToken);
    this.leasesChanged();
    if (!run.released) this.rememberUnreleased(run.job.leaseToken);
    this.deps.onEnded();
  }

  /** Runs that ended here unreleased (rare), kept while the server may still list their leases. */
  private rememberUnreleased(leaseToken: string): void {
    const now = Date.now();
    for (const [token, at] of this.unreleased) {
      if (now - at < 2 * this.deps.worker.leaseTtlMs) break; // a Map keeps insertion order: the rest are newer
      this.unreleased.delete(token);
    }
    this.unreleased.set(leaseToken, now);
  }
}

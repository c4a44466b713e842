// The heartbeat loop: one worker heartbeat per interval extends the leases of the running jobs,
// and brings back the server's cancels, lost leases, drain requests and deregistration. Through
// an outage, it stops the jobs whose leases have run out.
import { ApiRequestError, type SkipjackClient } from '../protocol/client.js';
import { eitherAborts } from './abort.js';
import { sleep } from './backoff.js';
import { killByForLease, leaseExtendedAt } from './lease-clock.js';
import type { ReleaseBatcher } from './release-batcher.js';
import { isUnknownWorker, type Registration } from './registration.js';
import type { RunningJobs } from './running-jobs.js';

export interface HeartbeatLoopDeps {
  client: Pick<SkipjackClient, 'workerHeartbeat'>;
  releases: Pick<ReleaseBatcher, 'withdraw'>;
  jobs: Pick<RunningJobs, 'runs' | 'heldRun' | 'anyStopping' | 'leasesChanged'>;
  /** heartbeatWaits is turned off here when the server turns out not to hold heartbeats. */
  worker: Readonly<Pick<Registration, 'id' | 'heartbeatMs' | 'leaseTtlMs' | 'log'>> &
    Pick<Registration, 'heartbeatWaits'>;
  /** Aborted when the drain begins: heartbeats go at the interval. */
  stopClaiming: AbortSignal;
  /** Aborted once the worker has stopped: no more heartbeats. */
  stopHeartbeat: AbortSignal;
  /** The server does not know the worker the heartbeat was sent as. */
  registerAgain(unknownId: string): Promise<void>;
  /** An operator deregistered this worker. */
  deregistered(): void;
  /** The server asked this worker to drain. */
  drain(): void;
}

export class HeartbeatLoop {
  /** Set while the loop sleeps because a job is stopping: its end wakes the loop. */
  private heartbeatNudge: (() => void) | null = null;

  constructor(private deps: HeartbeatLoopDeps) {}

  private get stopped(): boolean {
    return this.deps.stopHeartbeat.aborted;
  }

  /** A job ended: if it was the one stopping, the next heartbeat can be held again. */
  nudge(): void {
    this.heartbeatNudge?.();
  }

  /**
   * One heartbeat per interval. Where the server holds a heartbeat (heartbeatWaits) and nothing is
   * being stopped, the heartbeat is the wait: the server answers at the end of the interval, or at
   * once when a cancel or a drain is for this worker. While a job stops or the worker drains,
   * heartbeats go at the interval, as with a server that does not hold them.
   */
  async run(): Promise<void> {
    const { worker } = this.deps;
    let lastSent = 0;
    while (!this.stopped) {
      const held = worker.heartbeatWaits && this.nothingStopping();
      // An interval from the last heartbeat sent, not from its answer: a held one is answered an
      // interval after it extended the leases.
      if (!held) await this.sleepUntilNudged(lastSent + worker.heartbeatMs - Date.now());
      if (this.stopped) break;
      lastSent = Date.now();
      await this.heartbeat(held ? worker.heartbeatMs : 0);
      // Answered early with nothing for us (the server stopping, or a failure): keep the interval.
      const left = lastSent + worker.heartbeatMs - Date.now();
      if (held && left > 0 && this.nothingStopping()) await sleep(left, this.deps.stopHeartbeat);
    }
  }

  /** Once the stopping job has ended, the next heartbeat can be held again. */
  private async sleepUntilNudged(ms: number): Promise<void> {
    const nudged = new AbortController();
    this.heartbeatNudge = () => {
      if (this.deps.worker.heartbeatWaits && this.nothingStopping()) nudged.abort();
    };
    const abortable = eitherAborts(this.deps.stopHeartbeat, nudged.signal);
    try {
      await sleep(ms, abortable.signal);
    } finally {
      abortable.dispose();
      this.heartbeatNudge = null;
    }
  }

  private nothingStopping(): boolean {
    return !this.deps.stopClaiming.aborted && !this.deps.jobs.anyStopping();
  }

  private async heartbeat(waitMs: number): Promise<void> {
    const { client, jobs, worker } = this.deps;
    const runs = jobs.runs.filter((r) => !r.leaseLost && !r.releasing);
    const leases = runs.map((r) => r.lease);
    const sentAs = worker.id;
    const sentAt = Date.now();
    try {
      const answer = await client.workerHeartbeat(sentAs, leases, waitMs, this.deps.stopHeartbeat).catch((err) => {
        // A server of an older version (a rolling deploy, a rollback) refuses waitMs: ask as before.
        if (!(waitMs > 0 && err instanceof ApiRequestError && err.status === 400)) throw err;
        worker.log.warn({ err: err.message }, 'server does not hold heartbeats; heartbeating at the interval');
        worker.heartbeatWaits = false;
        return client.workerHeartbeat(sentAs, leases);
      });
      const extendedAt = leaseExtendedAt(sentAt, Date.now(), answer);
      if (answer.deregistered) return this.deps.deregistered();
      for (const id of answer.cancel) {
        const run = jobs.heldRun(id);
        if (run) {
          worker.log.info({ jobId: id }, 'cancel requested; stopping the job');
          run.stop('cancelled');
        }
      }
      for (const id of answer.lost) {
        jobs.heldRun(id)?.onLeaseLost();
      }
      for (const run of runs) if (!run.leaseLost) run.leaseExtendedAt = Math.max(run.leaseExtendedAt, extendedAt);
      jobs.leasesChanged();
      if (answer.drain && !this.deps.stopClaiming.aborted) {
        worker.log.info('server asked this worker to drain');
        this.deps.drain();
      }
    } catch (err) {
      if (this.stopped) return;
      if (isUnknownWorker(err)) return this.deps.registerAgain(sentAs);
      // Running jobs keep running while their leases may still hold: the server may come back.
      worker.log.warn({ err: (err as Error).message }, 'heartbeat failed; jobs keep running while their leases last');
      this.stopJobsOutlivingLeases();
    }
  }

  /**
   * A job whose lease will have run out before the next heartbeat can extend it stops, unreleased:
   * the server takes such a lease back and the job runs elsewhere, and two copies must not run at
   * once. A partition shorter than the lease TTL stops nothing.
   */
  private stopJobsOutlivingLeases(): void {
    const { worker } = this.deps;
    const nextChance = Date.now() + worker.heartbeatMs;
    for (const run of this.deps.jobs.runs) {
      if (run.leaseLost || nextChance < run.leaseExtendedAt + worker.leaseTtlMs) continue;
      const jobId = run.job.id;
      // An outcome still waiting for the server would be refused as stale: the job runs again.
      if (run.releasing) {
        if (this.deps.releases.withdraw(jobId, 'the lease ran out before the server could take this outcome')) {
          worker.log.warn(
            { jobId, leaseTtlMs: worker.leaseTtlMs },
            "no heartbeat got through for the lease TTL; dropping the job's outcome, which the server can no longer take (the job will run again)",
          );
        }
        continue;
      }
      worker.log.warn(
        { jobId, leaseTtlMs: worker.leaseTtlMs },
        'no heartbeat got through for the lease TTL; its lease is gone, stopping the job',
      );
      // Killed before the lease ends, its grace cut short if need be.
      run.onLeaseLost(killByForLease(run.leaseExtendedAt, worker.leaseTtlMs));
    }
  }
}

// One claimed job on this worker, from its first process to its release: runs it, ships its
// output, restarts it when its policy says so, and releases it with the outcome.
import type { Logger } from 'pino';
import { refusedForGood, type SkipjackClient } from '../protocol/client.js';
import type { Release, ReleaseItem } from '../protocol/schemas.js';
import type { ClaimedJob } from '../protocol/types.js';
import { checkAllowed } from './allowlist.js';
import { Backoff, sleep } from './backoff.js';
import { LogShipper } from './log-shipper.js';
import type { ReleaseBatcher } from './release-batcher.js';
import { RestartTracker, type RestartPolicy } from './restart-policy.js';
import type { Launcher } from './spawner.js';
import { superviseProcess, type ProcessResult, type StopReason, type SupervisedProcess } from './supervisor.js';

export interface JobRunDeps {
  client: SkipjackClient;
  releases: ReleaseBatcher;
  allow: string[];
  executor: 'process' | 'noop';
  /** How job processes are started; in this process when absent. */
  launch?: Launcher;
  log: Logger;
}

export class JobRun {
  leaseLost = false;
  /** Set once the outcome is on its way: the lease ends with it, so heartbeats leave it out. */
  releasing = false;
  /** Set once the server took the outcome. */
  released = false;
  private stopReason: StopReason | null = null;
  private proc!: SupervisedProcess;
  /** The current process's output shipper, made at its first output: most short jobs print nothing. */
  private shipper: LogShipper | null = null;
  /** Cuts a restart's waits short on a stop; made when a restart waits. */
  private wake: AbortController | null = null;

  /**
   * When the request that last extended this run's lease was sent (its claim, then each heartbeat
   * that named it and was answered): the lease lasts at least the lease TTL from then.
   */
  leaseExtendedAt: number;
  /** The job's run number on the server: its claim's, then each restart's. */
  private currentRun: number;

  constructor(
    readonly job: ClaimedJob,
    private deps: JobRunDeps,
    leaseStartedAt = Date.now(),
  ) {
    this.leaseExtendedAt = leaseStartedAt;
    this.currentRun = job.attempt;
  }

  /** Runs to the end (release included); never rejects. */
  async run(): Promise<void> {
    const restarts = new RestartTracker(this.job.restart as RestartPolicy | null);
    const log = this.deps.log;
    for (;;) {
      this.startProcess();
      const result = await this.proc.done;
      await this.shipper?.flush();
      if (this.leaseLost)
        return void log.warn({ reason: result.reason }, 'job ended after its lease was lost; not releasing');
      const wanted = restarts.decide(result);
      const decision = this.stopReason ? { action: 'end' as const } : wanted;
      if (decision.action === 'restart') {
        log.warn(
          {
            exitCode: result.exitCode,
            signal: result.signal,
            restart: decision.restartNumber,
            delayMs: decision.delayMs,
          },
          'job process ended; restarting it by its policy',
        );
        if (await this.restart(result, decision.delayMs)) continue;
      }
      // A stop is the outcome where it ended the job: it killed the process, or it kept the policy
      // from restarting it. One that came after the process ended by itself (while a leftover of
      // its group got its grace, or its output drained) leaves the outcome as the process made it:
      // a job that exited 0 is not run again.
      const stopped =
        this.stopReason && (isStopReason(result.reason) || wanted.action === 'restart') ? this.stopReason : null;
      const error = decision.action === 'crash_loop' ? decision.error : undefined;
      return this.release(toRelease(this.job, result, stopped, error));
    }
  }

  /** Cancel (an operator's) or shutdown (the worker's): kill escalation, and no restart after. */
  stop(reason: StopReason): void {
    this.stopReason ??= reason;
    this.wake?.abort();
    this.proc?.stop(reason);
  }

  /** `killBy`: when the lease runs out (less a margin); the group is SIGKILLed by then, grace or not. */
  onLeaseLost(killBy?: number): void {
    if (this.leaseLost) return;
    this.deps.log.warn('lease lost (expired or reclaimed); stopping the job');
    this.abandon('cancelled');
    if (killBy !== undefined) this.killGroupBy(killBy);
  }

  /** Past the lease its job may run elsewhere: a long kill grace must not keep this copy going. */
  private killGroupBy(at: number): void {
    const proc = this.proc;
    const pid = proc?.pid;
    if (pid === undefined) return;
    const timer = setTimeout(
      () => {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // gone already
        }
      },
      Math.max(0, at - Date.now()),
    );
    // `done` resolves only once the group is empty: the pid is never someone else's while armed.
    void proc.done.then(() => clearTimeout(timer));
  }

  /** Stops the job, and sends the server nothing more of it: no output, no outcome. */
  abandon(reason: StopReason): void {
    this.leaseLost = true;
    this.shipper?.abandon();
    this.stop(reason);
  }

  /** A stop (a cancel, or the worker's shutdown) has been asked for. */
  get stopping(): boolean {
    return this.stopReason !== null;
  }

  get lease() {
    return { jobId: this.job.id, leaseToken: this.job.leaseToken };
  }

  private startProcess(): void {
    const { job, deps } = this;
    this.shipper = null;
    const refusal = checkAllowed(job.command, deps.allow, { cwd: job.cwd ?? undefined, pathEnv: job.env.PATH });
    if (refusal) this.proc = refusedProcess(refusal);
    else if (deps.executor === 'noop') this.proc = noopProcess();
    else
      this.proc = superviseProcess(
        {
          command: job.command,
          env: job.env,
          cwd: job.cwd ?? undefined,
          timeoutSeconds: job.timeoutSeconds ?? undefined,
          killSignal: (job.killSignal ?? undefined) as NodeJS.Signals | undefined,
          killGraceSeconds: job.killGraceSeconds ?? undefined,
          outputCapBytes: job.outputCapBytes ?? undefined,
        },
        (chunk) => (this.shipper ??= this.newShipper()).push(chunk),
        deps.launch,
      );
    if (this.stopReason) this.proc.stop(this.stopReason);
  }

  private newShipper(): LogShipper {
    const { job, deps } = this;
    return new LogShipper(
      deps.client,
      job.id,
      job.leaseToken,
      () => this.onLeaseLost(),
      (err) => deps.log.warn({ err: err.message }, 'job output could not be delivered; dropping it'),
    );
  }

  /** Waits out the delay (a stop cuts it short), then opens the next run on the server. */
  private async restart(result: ProcessResult, delayMs: number): Promise<boolean> {
    const wake = (this.wake ??= new AbortController());
    await sleep(delayMs, wake.signal);
    if (this.stopReason) return false;
    const backoff = new Backoff(100, 5000);
    // The run that ended: a retry of a restart the server already recorded gets the same answer.
    const report = {
      leaseToken: this.job.leaseToken,
      run: this.currentRun,
      exitCode: result.exitCode,
      signal: result.signal,
      reason: result.reason === 'timed_out' ? ('timed_out' as const) : ('exited' as const),
    };
    for (;;) {
      try {
        this.currentRun = (await this.deps.client.restart(this.job.id, report)).run;
        return true;
      } catch (err) {
        if (refusedForGood(err)) {
          // The lease is gone, or the server will not restart this job: then its outcome is released.
          if (err.code === 'stale_lease') this.onLeaseLost();
          return false;
        }
        // Anything else (an outage, a 5xx, a proxy's refusal, a garbled answer) is worth another try.
        await sleep(backoff.next(), wake.signal);
        if (this.stopReason) return false;
      }
    }
  }

  private async release(r: ReleaseItem): Promise<void> {
    this.releasing = true;
    this.deps.log.info({ outcome: r.outcome, reason: r.reason, exitCode: r.exitCode, signal: r.signal }, 'job ended');
    const answer = await this.deps.releases.release(r);
    this.released = answer.ok;
    if (!answer.ok)
      this.deps.log.warn(
        { err: answer.message },
        answer.error === 'dropped' ? 'outcome dropped undelivered' : 'release refused; the lease was lost meanwhile',
      );
  }
}

/** The server keeps 10,000 characters of an error; a longer one must not sink a whole batch. */
const clip = (s: string | undefined) => (s === undefined ? null : s.length > 10_000 ? `${s.slice(0, 9_990)}…` : s);

function toRelease(job: ClaimedJob, r: ProcessResult, stopped: StopReason | null, crashLoop?: string): ReleaseItem {
  const { outcome, reason, error } = outcomeOf(r, stopped, crashLoop);
  // A null signal or error is left out: a release is one of up to a thousand in a request.
  const release: ReleaseItem = { jobId: job.id, leaseToken: job.leaseToken, outcome, reason, exitCode: r.exitCode };
  if (r.signal) release.signal = r.signal;
  const message = error ?? clip(r.error);
  if (message) release.error = message;
  return release;
}

function outcomeOf(
  r: ProcessResult,
  stopped: StopReason | null,
  crashLoop?: string,
): { outcome: Release['outcome']; reason: NonNullable<Release['reason']>; error?: string } {
  if (crashLoop) return { outcome: 'failed', reason: 'crash_loop', error: crashLoop };
  // A stop we asked for wins over however the process happened to end.
  if (stopped === 'shutdown') return { outcome: 'requeue', reason: 'cancelled' };
  if (stopped === 'cancelled') return { outcome: 'cancelled', reason: 'cancelled' };
  switch (r.reason) {
    case 'exited':
      return r.exitCode === 0 ? SUCCEEDED : { outcome: 'failed', reason: 'exited' };
    case 'timed_out':
      return { outcome: 'failed', reason: 'timed_out', error: clip(r.error) ?? 'timed out' };
    case 'spawn_failed':
      return { outcome: 'failed', reason: r.error?.startsWith('refused:') ? 'refused' : 'spawn_failed' };
    case 'cancelled':
      return { outcome: 'cancelled', reason: 'cancelled' };
    case 'shutdown':
      return { outcome: 'requeue', reason: 'cancelled' };
  }
}

const SUCCEEDED = { outcome: 'succeeded', reason: 'exited' } as const;

const isStopReason = (reason: ProcessResult['reason']): reason is StopReason =>
  reason === 'cancelled' || reason === 'shutdown';

function endedProcess(result: Partial<ProcessResult>): SupervisedProcess {
  const full: ProcessResult = {
    reason: 'exited',
    exitCode: 0,
    signal: null,
    warnings: [],
    outputBytes: 0,
    droppedBytes: 0,
    truncated: false,
    durationMs: 0,
    ...result,
  };
  return { pid: undefined, done: Promise.resolve(full), cancel() {}, stop() {} };
}

/** A job the allowlist refuses never starts; it ends like a failed spawn, with the reason. */
const refusedProcess = (reason: string) =>
  endedProcess({ reason: 'spawn_failed', exitCode: null, error: `refused: ${reason}` });

/** The benchmark executor: success at once, nothing run. */
const noopProcess = () => endedProcess({});

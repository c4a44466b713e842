// The worker agent: register, long-poll for jobs, run each as a supervised process, ship its
// output, heartbeat its leases, release it with its outcome, and drain on request. This wires the
// parts (claim-loop.ts, heartbeat-loop.ts, running-jobs.ts, registration.ts) and runs the
// worker's life: start, registering again, drain and stop.
import type { Logger } from 'pino';
import { SkipjackClient } from '../protocol/client.js';
import { sleep } from './backoff.js';
import { ClaimLoop } from './claim-loop.js';
import { HeartbeatLoop } from './heartbeat-loop.js';
import type { WorkerOptions } from './options.js';
import { Registration } from './registration.js';
import { ReleaseBatcher } from './release-batcher.js';
import { RunningJobs } from './running-jobs.js';
import { SpawnHelper } from './spawner.js';

export type { WorkerOptions } from './options.js';

export class WorkerAgent {
  readonly client: SkipjackClient;
  private registration: Registration;
  private releases: ReleaseBatcher;
  private jobs: RunningJobs;
  private claims: ClaimLoop;
  private heartbeats: HeartbeatLoop;
  private spawnHelper: SpawnHelper | null;
  /** Aborted when the drain begins: claiming nothing more. */
  private stopClaiming = new AbortController();
  /** Aborted once the drain is done: heartbeating no more. */
  private stopHeartbeat = new AbortController();
  private loops: Promise<void>[] = [];
  private shutdownPromise: Promise<void> | null = null;
  private registeringAgain: Promise<void> | null = null;
  private starting: Promise<void> | null = null;

  constructor(private opts: WorkerOptions) {
    this.client = new SkipjackClient({ baseUrl: opts.serverUrl, token: opts.token });
    this.spawnHelper = opts.spawnHelper === false || opts.executor === 'noop' ? null : new SpawnHelper();
    this.registration = new Registration(this.client, opts, this.slots);
    this.releases = new ReleaseBatcher(
      this.client,
      (err, delay) => this.log.warn({ err: err.message, retryInMs: Math.round(delay) }, 'release failed; retrying'),
      () => this.claims.wake(),
    );
    this.jobs = new RunningJobs({
      client: this.client,
      releases: this.releases,
      worker: this.registration,
      allow: opts.allow ?? [],
      executor: opts.executor ?? 'process',
      launch: () => this.spawnHelper?.launch,
      onEnded: () => {
        this.claims.onJobEnded();
        this.heartbeats.nudge();
      },
      armDeadline: (at) => this.spawnHelper?.killAllBy(at),
    });
    // What both loops work with; each takes the narrow part of it that its deps type names.
    const shared = {
      client: this.client,
      releases: this.releases,
      jobs: this.jobs,
      worker: this.registration,
      stopClaiming: this.stopClaiming.signal,
      registerAgain: (unknownId: string) => this.registerAgain(unknownId),
    };
    this.claims = new ClaimLoop({
      ...shared,
      slots: this.slots,
      pollWaitMs: opts.pollWaitMs,
      claimGatherMs: opts.claimGatherMs,
    });
    this.heartbeats = new HeartbeatLoop({
      ...shared,
      stopHeartbeat: this.stopHeartbeat.signal,
      deregistered: () => this.deregistered(),
      drain: () => void this.shutdown(),
    });
  }

  private get log(): Logger {
    return this.registration.log;
  }

  private get draining(): boolean {
    return this.stopClaiming.signal.aborted;
  }

  private get stopped(): boolean {
    return this.stopHeartbeat.signal.aborted;
  }

  private async startSpawnHelper(): Promise<void> {
    if (!this.spawnHelper) return;
    const started = await this.spawnHelper.start();
    if (started.ok) return void this.log.info('job processes start through the spawn helper (python3)');
    this.log.warn(
      { reason: started.reason },
      'spawn helper unavailable (python3 3.9+ needed); the worker forks job processes itself, more slowly',
    );
    this.spawnHelper.stop();
    this.spawnHelper = null;
  }

  get workerId(): string {
    return this.registration.id;
  }

  get slots(): number {
    return this.opts.capacity?.slots ?? 4;
  }

  /** active: claiming; draining: claiming no more, its jobs finishing; stopped: claiming and heartbeating no more. */
  get lifecycle(): 'active' | 'draining' | 'stopped' {
    return this.stopped ? 'stopped' : this.draining ? 'draining' : 'active';
  }

  get runningJobIds(): number[] {
    return this.jobs.jobIds;
  }

  /** Registers and starts claiming. A stop asked for meanwhile waits for it (see drain). */
  start(): Promise<void> {
    this.starting ??= (async () => {
      await this.startSpawnHelper();
      await this.registration.register(this.stopClaiming.signal);
      this.loops = [this.claims.run(), this.heartbeats.run()];
    })();
    return this.starting;
  }

  /**
   * The server's database does not hold this worker: it was reset or restored (a `skipjack dev`
   * started again with a fresh one, say). The leases went with it, so the jobs stop unreleased,
   * and the worker registers again, as a new worker, and goes on. Once for each id, however many
   * requests made under it are refused.
   */
  private registerAgain(unknownId: string): Promise<void> {
    if (this.registration.id !== unknownId) return Promise.resolve();
    this.registeringAgain ??= (async () => {
      this.log.error(
        { running: this.jobs.size },
        'the server does not know this worker (was its database reset?); stopping its jobs, whose leases are gone, and registering again',
      );
      this.jobs.stopUnreleased();
      await this.registration.register(this.stopClaiming.signal).catch(async (err: Error) => {
        if (this.draining) return; // stopping: register() gave up for that reason
        this.log.error({ err: err.message }, 'registering again failed; retrying');
        await sleep(1000, this.stopClaiming.signal);
      });
    })().finally(() => (this.registeringAgain = null));
    return this.registeringAgain;
  }

  /** An operator deregistered this worker: the server took its leases back, so its jobs stop unreleased, and it stops. */
  private deregistered(): void {
    this.log.warn(
      { running: this.jobs.size },
      'this worker was deregistered (DELETE /workers/:id); stopping its jobs, which run elsewhere, and stopping',
    );
    this.jobs.stopUnreleased();
    if (!this.draining) void this.shutdown();
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
    this.stopClaiming.abort();
    this.claims.onDrain();
    this.log.info({ running: this.jobs.size }, 'draining: no new claims; waiting for running jobs');
    this.shutdownPromise = this.drain();
    return this.shutdownPromise;
  }

  /**
   * Waits for the server no more (a third stop request): jobs still running stop unreleased, and
   * output and outcomes not yet delivered are dropped. The server gives those jobs out again once
   * their leases expire.
   */
  giveUp(): void {
    const waiting = this.jobs.runs.filter((run) => run.releasing).length;
    this.log.warn(
      { running: this.jobs.size - waiting, outcomesWaiting: waiting },
      'not waiting for the server any more: stopping jobs unreleased and dropping undelivered outcomes (their jobs run again once their leases expire)',
    );
    this.releases.abandon('the worker stopped without waiting for the server to take this outcome');
    for (const run of this.jobs.runs) run.abandon('shutdown');
    if (!this.draining) void this.shutdown();
  }

  /** Stops every running job now; each is released as requeue. */
  stopAll(): void {
    this.jobs.stopAll();
  }

  private async drain(): Promise<void> {
    // A registration in flight completes first, so that a worker registered just now deregisters.
    await this.starting?.catch(() => {});
    const timeout = this.opts.drainTimeoutMs ?? 60_000;
    const timer = setTimeout(() => {
      this.log.warn({ running: this.jobs.size }, 'drain timeout; stopping the remaining jobs and requeueing them');
      this.stopAll();
    }, timeout);
    await this.jobs.allDone();
    clearTimeout(timer);
    this.stopHeartbeat.abort();
    await Promise.all(this.loops);
    const { id, key } = this.registration;
    if (id)
      await this.client.deregister(id, key).catch((err) => this.log.warn({ err: err.message }, 'deregister failed'));
    this.spawnHelper?.stop();
    this.log.info('worker stopped');
  }
}

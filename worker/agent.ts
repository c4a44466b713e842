// The worker agent: register, long-poll for jobs, run each as a supervised process, ship its
// output, heartbeat its leases, release it with its outcome, and drain on request.
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { ApiRequestError, UnreachableError, SkipjackClient, refusedForGood } from '../protocol/client.js';
import { MAX_BATCH } from '../protocol/schemas.js';
import type { ClaimedJob } from '../protocol/types.js';
import { eitherAborts } from './abort.js';
import { Backoff, sleep } from './backoff.js';
import { JobRun } from './job-run.js';
import { SpawnHelper } from './spawner.js';
import { ReleaseBatcher } from './release-batcher.js';
import { lazyChild } from './lazy-log.js';
import { redactor } from './redact.js';

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

export class WorkerAgent {
  readonly client: SkipjackClient;
  private id = '';
  /** Proves to the server that this worker is itself (its own deregistration); from a server before 009, none. */
  private key: string | undefined;
  private heartbeatMs = 10_000;
  /** The server's lease TTL (from the registration): a lease not extended for this long is gone. */
  private leaseTtlMs = 30_000;
  /** The server holds a heartbeat until it has a cancel or a drain for us, so both arrive at once. */
  private heartbeatWaits = false;
  /** Set while the heartbeat loop sleeps because a job is stopping: its end wakes the loop. */
  private heartbeatNudge: (() => void) | null = null;
  /**
   * Each run in progress, and its whole run (release included), which the drain waits on. By lease
   * token, not job id: a job whose lease was lost can be claimed here again while its old process
   * still has its kill grace, and both hold a slot until they end.
   */
  private running = new Map<string, { run: JobRun; done: Promise<void> }>();
  /** Lease token → when its run ended here without a release the server took. */
  private unreleased = new Map<string, number>();
  private draining = false;
  private stopClaiming = new AbortController();
  private slotFreed: (() => void) | null = null;
  private loops: Promise<void>[] = [];
  private log: Logger;
  private stopped = false;
  private stopHeartbeat = new AbortController();
  private shutdownPromise: Promise<void> | null = null;
  private releases: ReleaseBatcher;
  private waitingPoll: { abort: AbortController; since: number; endAsked?: NodeJS.Timeout } | null = null;
  private spawnHelper: SpawnHelper | null;
  private registeringAgain: Promise<void> | null = null;
  private starting: Promise<void> | null = null;

  constructor(private opts: WorkerOptions) {
    this.client = new SkipjackClient({ baseUrl: opts.serverUrl, token: opts.token });
    this.log = opts.log;
    this.spawnHelper = opts.spawnHelper === false || opts.executor === 'noop' ? null : new SpawnHelper();
    this.releases = new ReleaseBatcher(
      this.client,
      (err, delay) => this.log.warn({ err: err.message, retryInMs: Math.round(delay) }, 'release failed; retrying'),
      () => this.slotFreed?.(),
    );
  }

  private async startSpawnHelper(): Promise<void> {
    if (!this.spawnHelper) return;
    const started = await this.spawnHelper.start();
    if (started.ok) return void this.log.info('job processes start through the spawn helper (python3)');
    this.log.warn({ reason: started.reason }, 'spawn helper unavailable (python3 3.9+ needed); the worker forks job processes itself, more slowly');
    this.spawnHelper.stop();
    this.spawnHelper = null;
  }

  get workerId(): string {
    return this.id;
  }

  get slots(): number {
    return this.opts.capacity?.slots ?? 4;
  }

  /** active: claiming; draining: claiming no more, its jobs finishing; stopped: claiming and heartbeating no more. */
  get lifecycle(): 'active' | 'draining' | 'stopped' {
    return this.stopped ? 'stopped' : this.draining ? 'draining' : 'active';
  }

  get runningJobIds(): number[] {
    return [...this.running.values()].map(({ run }) => run.job.id);
  }

  /** Registers and starts claiming. A stop asked for meanwhile waits for it (see drain). */
  start(): Promise<void> {
    this.starting ??= (async () => {
      await this.startSpawnHelper();
      await this.register();
      this.loops = [this.claimLoop(), this.heartbeatLoop()];
    })();
    return this.starting;
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
        this.key = answer.workerKey;
        this.heartbeatMs = answer.heartbeatIntervalMs;
        this.leaseTtlMs = answer.leaseTtlMs;
        this.heartbeatWaits = answer.heartbeatWaits === true;
        this.log = this.opts.log.child({ workerId: this.id });
        this.log.info({ server: this.client.baseUrl, slots: this.slots }, 'registered with the server');
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
      // Finished jobs whose outcome is still queued ride along: the server releases them first,
      // so their room counts in this very claim.
      await this.gatherRoom();
      if (this.draining) break; // outcomes gathered meanwhile go out through the release batcher
      const carried = this.releases.takeForClaim();
      // A request claims at most MAX_BATCH, however many slots are free.
      const free = Math.min(this.slots - this.running.size + carried.items.length, MAX_BATCH);
      if (free <= 0) {
        carried.giveBack();
        await new Promise<void>((r) => (this.slotFreed = r));
        // Jobs released in one batch free their slots in the same turn: let them all land, so
        // the next claim asks for all of them at once instead of one.
        await new Promise((r) => setImmediate(r));
        continue;
      }
      const poll = new AbortController();
      const claimedAs = this.id;
      if (carried.items.length === 0) this.waitingPoll = { abort: poll, since: Date.now() };
      // Carrying outcomes, do not long-poll: their jobs are done only once the answer is back.
      // Nor abort such a claim (a drain, more room): the server may have applied them already,
      // and sent again they would be refused as stale. A long-poll is ended by asking the server
      // (endWaitingPoll), and hung up on only if that fails.
      const signal = carried.items.length ? undefined : poll.signal;
      const sentAt = Date.now();
      try {
        const waitMs = carried.items.length ? 0 : this.opts.pollWaitMs ?? 30_000;
        const answer = await this.client.claim(claimedAs, free, waitMs, signal, carried.items);
        carried.settle(answer.releases);
        const { jobs } = answer;
        backoff.reset();
        // A claim that was in flight when the drain began: hand those jobs straight back.
        if (this.draining) await this.requeue(jobs);
        else for (const job of jobs) this.startJob(job, sentAt);
      } catch (err) {
        carried.giveBack();
        if (this.draining) break;
        if (poll.signal.aborted) continue; // re-asked with more room; see restartPollForRoom
        if (isUnknownWorker(err)) {
          await this.registerAgain(claimedAs);
          continue;
        }
        if (mayHaveReachedServer(err)) await this.adoptLostClaim(sentAt);
        const delay = backoff.next();
        this.log.warn({ err: (err as Error).message, retryInMs: Math.round(delay) }, 'claim failed; retrying');
        await sleep(delay, this.stopClaiming.signal);
      } finally {
        clearTimeout(this.waitingPoll?.endAsked);
        this.waitingPoll = null;
      }
    }
  }

  /**
   * Waits, up to claimGatherMs, until every running job has ended, holding their outcomes for the
   * claim to carry. Short jobs end a few at a time; claiming for each few cost a round trip each,
   * and a third of the jobs/s on /bin/true jobs (bench process scenario).
   */
  private async gatherRoom(): Promise<void> {
    // Only once a slot has come free: room the last claim could not fill is asked for at once.
    if (this.releases.queuedCount() === 0) return;
    // Held outcomes are no longer heartbeated: never hold them near the lease's end.
    const until = Date.now() + Math.min(this.opts.claimGatherMs ?? 10, this.heartbeatMs / 4);
    const allEnded = () => this.running.size <= this.releases.queuedCount();
    const endHold = this.releases.hold();
    try {
      while (!allEnded() && !this.draining && Date.now() < until) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, until - Date.now());
          this.slotFreed = () => { clearTimeout(timer); resolve(); };
        });
      }
    } finally {
      endHold();
    }
  }

  /**
   * A claim whose answer never came (its connection cut after the server had taken jobs for it)
   * leaves jobs under leases this worker holds without knowing it: they would sit until their
   * leases expired, and be charged an attempt they never ran. Ask the server which jobs it says
   * this worker runs, and start those it does not know. The room they take is the failed claim's,
   * still free here, so capacity holds. Their leases started no earlier than that claim was sent.
   */
  private async adoptLostClaim(claimSentAt: number): Promise<void> {
    let held: ClaimedJob[];
    try {
      held = (await this.client.heldJobs(this.id, this.key)).jobs;
    } catch {
      return; // the server is away: as before, their leases expire and the jobs run again
    }
    // A lease token is new with each claim: one never held here came in the lost answer. (A run
    // that ended here unreleased, say stopped for a lease it took for gone, is not started again.)
    const lost = held.filter((job) => !this.running.has(job.leaseToken) && !this.unreleased.has(job.leaseToken));
    if (lost.length === 0) return;
    if (this.draining) return this.requeue(lost);
    this.log.warn({ jobIds: lost.map((j) => j.id) }, 'a claim\'s answer was lost on its way; running the jobs the server took for it');
    for (const job of lost) this.startJob(job, claimSentAt);
  }

  /** Runs that ended here unreleased (rare), kept while the server may still list their leases. */
  private rememberUnreleased(leaseToken: string): void {
    const now = Date.now();
    for (const [token, at] of this.unreleased) {
      if (now - at < 2 * this.leaseTtlMs) break; // a Map keeps insertion order: the rest are newer
      this.unreleased.delete(token);
    }
    this.unreleased.set(leaseToken, now);
  }

  /**
   * A job ended while a long-poll waits with the room we had before. Jobs that did not fit then
   * may fit now, and the server learns of the freed room only from a new request: ask again.
   */
  private restartPollForRoom(): void {
    if (this.waitingPoll && Date.now() - this.waitingPoll.since > 100) this.endWaitingPoll();
  }

  /**
   * Asks the server to answer the waiting long-poll now, with what it has. Hung up on instead, an
   * answer already on its way (jobs claimed for it a moment before) would be lost, its jobs
   * stranded until their leases expired. Only if no answer comes soon (an older server, a lost
   * wake-up, no server at all) is it hung up on.
   */
  private endWaitingPoll(): void {
    const poll = this.waitingPoll;
    if (!poll || poll.endAsked) return;
    poll.endAsked = setTimeout(() => poll.abort.abort(), END_POLL_PATIENCE_MS);
    this.client.endPoll(this.id, this.key).catch(() => poll.abort.abort());
  }

  private async requeue(jobs: ClaimedJob[]): Promise<void> {
    await Promise.all(jobs.map((j) => this.releases.release({ jobId: j.id, leaseToken: j.leaseToken, outcome: 'requeue', reason: 'cancelled' })));
    if (jobs.length) this.log.info({ jobIds: jobs.map((j) => j.id) }, 'draining: requeued jobs claimed as the drain began');
  }

  private startJob(job: ClaimedJob, claimSentAt: number): void {
    const log = lazyChild(this.log, { jobId: job.id, attempt: job.attempt });
    if (this.log.isLevelEnabled('info')) {
      const redact = redactor(job.secretEnv.map((k) => job.env[k] ?? ''));
      log.info({ command: redact(job.command.join(' ')) }, 'job started');
    }
    const run = new JobRun(job, { client: this.client, releases: this.releases, allow: this.opts.allow ?? [], executor: this.opts.executor ?? 'process', launch: this.spawnHelper?.launch, log }, claimSentAt);
    const done = run.run().then(() => this.jobEnded(run), (err) => {
      log.error({ err }, 'job run failed unexpectedly; its lease will expire');
      this.jobEnded(run);
    });
    this.running.set(job.leaseToken, { run, done });
  }

  private jobEnded(run: JobRun): void {
    this.running.delete(run.job.leaseToken);
    if (!run.released) this.rememberUnreleased(run.job.leaseToken);
    this.slotFreed?.();
    this.restartPollForRoom();
    this.heartbeatNudge?.();
  }

  /**
   * One heartbeat per interval. Where the server holds a heartbeat (heartbeatWaits) and nothing is
   * being stopped, the heartbeat is the wait: the server answers at the end of the interval, or at
   * once when a cancel or a drain is for this worker. While a job stops or the worker drains,
   * heartbeats go at the interval, as with a server that does not hold them.
   */
  private async heartbeatLoop(): Promise<void> {
    let lastSent = 0;
    while (!this.stopped) {
      const held = this.heartbeatWaits && this.nothingStopping();
      // An interval from the last heartbeat sent, not from its answer: a held one is answered an
      // interval after it extended the leases.
      if (!held) await this.sleepUntilNudged(lastSent + this.heartbeatMs - Date.now());
      if (this.stopped) break;
      lastSent = Date.now();
      await this.heartbeat(held ? this.heartbeatMs : 0);
      // Answered early with nothing for us (the server stopping, or a failure): keep the interval.
      const left = lastSent + this.heartbeatMs - Date.now();
      if (held && left > 0 && this.nothingStopping()) await sleep(left, this.stopHeartbeat.signal);
    }
  }

  /** Once the stopping job has ended, the next heartbeat can be held again. */
  private async sleepUntilNudged(ms: number): Promise<void> {
    const nudged = new AbortController();
    this.heartbeatNudge = () => { if (this.heartbeatWaits && this.nothingStopping()) nudged.abort(); };
    const abortable = eitherAborts(this.stopHeartbeat.signal, nudged.signal);
    try {
      await sleep(ms, abortable.signal);
    } finally {
      abortable.dispose();
      this.heartbeatNudge = null;
    }
  }

  /** The run of this job whose lease is still held here: the one a heartbeat names. */
  private heldRun(jobId: number): JobRun | undefined {
    for (const { run } of this.running.values()) if (run.job.id === jobId && !run.leaseLost) return run;
    return undefined;
  }

  private nothingStopping(): boolean {
    return !this.draining && ![...this.running.values()].some(({ run }) => run.stopping);
  }

  private async heartbeat(waitMs: number): Promise<void> {
    const runs = [...this.running.values()].map((r) => r.run).filter((r) => !r.leaseLost && !r.releasing);
    const leases = runs.map((r) => r.lease);
    const sentAs = this.id;
    const sentAt = Date.now();
    try {
      const answer = await this.client.workerHeartbeat(sentAs, leases, waitMs, this.stopHeartbeat.signal).catch((err) => {
        // A server of an older version (a rolling deploy, a rollback) refuses waitMs: ask as before.
        if (!(waitMs > 0 && err instanceof ApiRequestError && err.status === 400)) throw err;
        this.log.warn({ err: err.message }, 'server does not hold heartbeats; heartbeating at the interval');
        this.heartbeatWaits = false;
        return this.client.workerHeartbeat(sentAs, leases);
      });
      if (answer.deregistered) return this.deregistered();
      for (const id of answer.cancel) {
        const run = this.heldRun(id);
        if (run) {
          this.log.info({ jobId: id }, 'cancel requested; stopping the job');
          run.stop('cancelled');
        }
      }
      for (const id of answer.lost) {
        this.heldRun(id)?.onLeaseLost();
      }
      for (const run of runs) if (!run.leaseLost) run.leaseExtendedAt = sentAt;
      if (answer.drain && !this.draining) {
        this.log.info('server asked this worker to drain');
        void this.shutdown();
      }
    } catch (err) {
      if (this.stopped) return;
      if (isUnknownWorker(err)) return this.registerAgain(sentAs);
      // Running jobs keep running while their leases may still hold: the server may come back.
      this.log.warn({ err: (err as Error).message }, 'heartbeat failed; jobs keep running while their leases last');
      this.stopJobsOutlivingLeases();
    }
  }

  /**
   * A job whose lease will have run out before the next heartbeat can extend it stops, unreleased:
   * the server takes such a lease back and the job runs elsewhere, and two copies must not run at
   * once. A partition shorter than the lease TTL stops nothing.
   */
  private stopJobsOutlivingLeases(): void {
    const nextChance = Date.now() + this.heartbeatMs;
    for (const { run } of this.running.values()) {
      if (run.leaseLost || nextChance < run.leaseExtendedAt + this.leaseTtlMs) continue;
      const jobId = run.job.id;
      // An outcome still waiting for the server would be refused as stale: the job runs again.
      if (run.releasing) {
        if (this.releases.withdraw(jobId, 'the lease ran out before the server could take this outcome')) {
          this.log.warn({ jobId, leaseTtlMs: this.leaseTtlMs }, 'no heartbeat got through for the lease TTL; dropping the job\'s outcome, which the server can no longer take (the job will run again)');
        }
        continue;
      }
      this.log.warn({ jobId, leaseTtlMs: this.leaseTtlMs }, 'no heartbeat got through for the lease TTL; its lease is gone, stopping the job');
      run.onLeaseLost();
    }
  }

  /**
   * The server's database does not hold this worker: it was reset or restored (a `skipjack dev`
   * started again with a fresh one, say). The leases went with it, so the jobs stop unreleased,
   * and the worker registers again, as a new worker, and goes on. Once for each id, however many
   * requests made under it are refused.
   */
  private registerAgain(unknownId: string): Promise<void> {
    if (this.id !== unknownId) return Promise.resolve();
    this.registeringAgain ??= (async () => {
      this.log.error({ running: this.running.size }, 'the server does not know this worker (was its database reset?); stopping its jobs, whose leases are gone, and registering again');
      this.stopJobsUnreleased();
      await this.register().catch(async (err: Error) => {
        if (this.draining) return; // stopping: register() gave up for that reason
        this.log.error({ err: err.message }, 'registering again failed; retrying');
        await sleep(1000, this.stopClaiming.signal);
      });
    })().finally(() => (this.registeringAgain = null));
    return this.registeringAgain;
  }

  /** An operator deregistered this worker: the server took its leases back, so its jobs stop unreleased, and it stops. */
  private deregistered(): void {
    this.log.warn({ running: this.running.size }, 'this worker was deregistered (DELETE /workers/:id); stopping its jobs, which run elsewhere, and stopping');
    this.stopJobsUnreleased();
    if (!this.draining) void this.shutdown();
  }

  /** The server no longer holds this worker's leases: every job stops, and none is released. */
  private stopJobsUnreleased(): void {
    for (const { run } of this.running.values()) run.onLeaseLost();
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
    this.endWaitingPoll(); // what it answers goes straight back (requeue)
    this.slotFreed?.();
    this.log.info({ running: this.running.size }, 'draining: no new claims; waiting for running jobs');
    this.shutdownPromise = this.drain();
    return this.shutdownPromise;
  }

  /**
   * Waits for the server no more (a third stop request): jobs still running stop unreleased, and
   * output and outcomes not yet delivered are dropped. The server gives those jobs out again once
   * their leases expire.
   */
  giveUp(): void {
    const waiting = [...this.running.values()].filter(({ run }) => run.releasing).length;
    this.log.warn({ running: this.running.size - waiting, outcomesWaiting: waiting }, 'not waiting for the server any more: stopping jobs unreleased and dropping undelivered outcomes (their jobs run again once their leases expire)');
    this.releases.abandon('the worker stopped without waiting for the server to take this outcome');
    for (const { run } of this.running.values()) run.abandon('shutdown');
    if (!this.draining) void this.shutdown();
  }

  /** Stops every running job now; each is released as requeue. */
  stopAll(): void {
    for (const { run } of this.running.values()) run.stop('shutdown');
  }

  private async drain(): Promise<void> {
    // A registration in flight completes first, so that a worker registered just now deregisters.
    await this.starting?.catch(() => {});
    const timeout = this.opts.drainTimeoutMs ?? 60_000;
    const timer = setTimeout(() => {
      this.log.warn({ running: this.running.size }, 'drain timeout; stopping the remaining jobs and requeueing them');
      this.stopAll();
    }, timeout);
    await Promise.all([...this.running.values()].map((r) => r.done));
    clearTimeout(timer);
    this.stopped = true;
    this.stopHeartbeat.abort();
    await Promise.all(this.loops);
    if (this.id) await this.client.deregister(this.id, this.key).catch((err) => this.log.warn({ err: err.message }, 'deregister failed'));
    this.spawnHelper?.stop();
    this.log.info('worker stopped');
  }
}

/** Not refused by the API itself, nor by a server that was not listening: the server may have acted on it. */
const mayHaveReachedServer = (err: unknown) =>
  !refusedForGood(err) && !(err instanceof UnreachableError && err.code === 'ECONNREFUSED');

/** How long a long-poll asked to end may take to answer before it is hung up on. */
const END_POLL_PATIENCE_MS = 2000;

/** The server's own answer that it does not know the worker, not a proxy's 404. */
const isUnknownWorker = (err: unknown) => err instanceof ApiRequestError && err.status === 404 && err.code === 'unknown_worker';

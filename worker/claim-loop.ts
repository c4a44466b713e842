// The claim loop: long-polls the server for as many jobs as there are free slots, carrying the
// outcomes of finished jobs along, and adopts the jobs of a claim whose answer was lost.
import { UnreachableError, refusedForGood, type SkipjackClient } from '../protocol/client.js';
import { MAX_BATCH } from '../protocol/schemas.js';
import type { ClaimedJob } from '../protocol/types.js';
import { Backoff, sleep } from './backoff.js';
import type { ReleaseBatcher } from './release-batcher.js';
import { leaseExtendedAt } from './lease-clock.js';
import { isUnknownWorker, type Registration } from './registration.js';
import type { RunningJobs } from './running-jobs.js';

export interface ClaimLoopDeps {
  client: Pick<SkipjackClient, 'claim' | 'heldJobs' | 'endPoll'>;
  releases: Pick<ReleaseBatcher, 'takeForClaim' | 'queuedCount' | 'hold' | 'release'>;
  jobs: Pick<RunningJobs, 'size' | 'start' | 'ranHere'>;
  worker: Readonly<Pick<Registration, 'id' | 'key' | 'heartbeatMs' | 'log'>>;
  slots: number;
  pollWaitMs?: number;
  claimGatherMs?: number;
  /** Aborted when the drain begins: claim nothing more. */
  stopClaiming: AbortSignal;
  /** The server does not know the worker the claim was made as. */
  registerAgain(unknownId: string): Promise<void>;
}

export class ClaimLoop {
  private slotFreed: (() => void) | null = null;
  private waitingPoll: { abort: AbortController; since: number; endAsked?: NodeJS.Timeout } | null = null;

  constructor(private deps: ClaimLoopDeps) {}

  private get draining(): boolean {
    return this.deps.stopClaiming.aborted;
  }

  /** Room may have come free (an outcome queued): a loop waiting for room looks again. */
  wake(): void {
    this.slotFreed?.();
  }

  /** A job ended: its slot is free, and a long-poll waiting with less room is asked again. */
  onJobEnded(): void {
    this.slotFreed?.();
    this.restartPollForRoom();
  }

  /** The drain began: the waiting long-poll is ended (what it answers goes straight back, requeued). */
  onDrain(): void {
    this.endWaitingPoll();
    this.slotFreed?.();
  }

  /** Claims until the drain begins. */
  async run(): Promise<void> {
    const backoff = new Backoff(100, 5000);
    const { client, releases, jobs, worker } = this.deps;
    while (!this.draining) {
      // Finished jobs whose outcome is still queued ride along: the server releases them first,
      // so their room counts in this very claim.
      await this.gatherRoom();
      if (this.draining) break; // outcomes gathered meanwhile go out through the release batcher
      const carried = releases.takeForClaim();
      // A request claims at most MAX_BATCH, however many slots are free.
      const free = Math.min(this.deps.slots - jobs.size + carried.items.length, MAX_BATCH);
      if (free <= 0) {
        carried.giveBack();
        await new Promise<void>((r) => (this.slotFreed = r));
        // Jobs released in one batch free their slots in the same turn: let them all land, so
        // the next claim asks for all of them at once instead of one.
        await new Promise((r) => setImmediate(r));
        continue;
      }
      const poll = new AbortController();
      const claimedAs = worker.id;
      if (carried.items.length === 0) this.waitingPoll = { abort: poll, since: Date.now() };
      // Carrying outcomes, do not long-poll: their jobs are done only once the answer is back.
      // Nor abort such a claim (a drain, more room): the server may have applied them already,
      // and sent again they would be refused as stale. A long-poll is ended by asking the server
      // (endWaitingPoll), and hung up on only if that fails.
      const signal = carried.items.length ? undefined : poll.signal;
      const sentAt = Date.now();
      try {
        const waitMs = carried.items.length ? 0 : (this.deps.pollWaitMs ?? 30_000);
        const answer = await client.claim(claimedAs, free, waitMs, signal, carried.items);
        const receivedAt = Date.now();
        carried.settle(answer.releases);
        const { jobs: claimed } = answer;
        backoff.reset();
        // A claim that was in flight when the drain began: hand those jobs straight back.
        if (this.draining) await this.requeue(claimed);
        // Dated from what the server says, not from the send: a long-poll may wait 30 s first.
        else
          for (const job of claimed)
            jobs.start(
              job,
              leaseExtendedAt(sentAt, receivedAt, { serverMs: answer.serverMs, leaseAgeMs: job.leaseAgeMs }),
            );
      } catch (err) {
        carried.giveBack();
        if (this.draining) break;
        if (poll.signal.aborted) continue; // re-asked with more room; see restartPollForRoom
        if (isUnknownWorker(err)) {
          await this.deps.registerAgain(claimedAs);
          continue;
        }
        if (mayHaveReachedServer(err)) await this.adoptLostClaim(sentAt);
        const delay = backoff.next();
        worker.log.warn({ err: (err as Error).message, retryInMs: Math.round(delay) }, 'claim failed; retrying');
        await sleep(delay, this.deps.stopClaiming);
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
    const { releases, jobs } = this.deps;
    // Only once a slot has come free: room the last claim could not fill is asked for at once.
    if (releases.queuedCount() === 0) return;
    // Held outcomes are no longer heartbeated: never hold them near the lease's end.
    const until = Date.now() + Math.min(this.deps.claimGatherMs ?? 10, this.deps.worker.heartbeatMs / 4);
    const allEnded = () => jobs.size <= releases.queuedCount();
    const endHold = releases.hold();
    try {
      while (!allEnded() && !this.draining && Date.now() < until) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, until - Date.now());
          this.slotFreed = () => {
            clearTimeout(timer);
            resolve();
          };
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
    const { client, jobs, worker } = this.deps;
    let held: ClaimedJob[];
    const sentAt = Date.now();
    let dated: (job: ClaimedJob) => number;
    try {
      const answer = await client.heldJobs(worker.id, worker.key);
      const receivedAt = Date.now();
      held = answer.jobs;
      dated = (job) =>
        leaseExtendedAt(sentAt, receivedAt, { serverMs: answer.serverMs, leaseAgeMs: job.leaseAgeMs }, claimSentAt);
    } catch {
      return; // the server is away: as before, their leases expire and the jobs run again
    }
    // A lease token is new with each claim: one never held here came in the lost answer. (A run
    // that ended here unreleased, say stopped for a lease it took for gone, is not started again.)
    const lost = held.filter((job) => !jobs.ranHere(job.leaseToken));
    if (lost.length === 0) return;
    if (this.draining) return this.requeue(lost);
    worker.log.warn(
      { jobIds: lost.map((j) => j.id) },
      "a claim's answer was lost on its way; running the jobs the server took for it",
    );
    for (const job of lost) jobs.start(job, dated(job));
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
    const { worker } = this.deps;
    this.deps.client.endPoll(worker.id, worker.key).catch(() => poll.abort.abort());
  }

  private async requeue(jobs: ClaimedJob[]): Promise<void> {
    await Promise.all(
      jobs.map((j) =>
        this.deps.releases.release({ jobId: j.id, leaseToken: j.leaseToken, outcome: 'requeue', reason: 'cancelled' }),
      ),
    );
    if (jobs.length)
      this.deps.worker.log.info(
        { jobIds: jobs.map((j) => j.id) },
        'draining: requeued jobs claimed as the drain began',
      );
  }
}

/** Not refused by the API itself, nor by a server that was not listening: the server may have acted on it. */
const mayHaveReachedServer = (err: unknown) =>
  !refusedForGood(err) && !(err instanceof UnreachableError && err.code === 'ECONNREFUSED');

/** How long a long-poll asked to end may take to answer before it is hung up on. */
const END_POLL_PATIENCE_MS = 2000;

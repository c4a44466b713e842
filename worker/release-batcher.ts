// Releases go up in batches: outcomes that end within a few milliseconds of each other share
// one request. The claim loop may take them along on its next claim instead (one round trip for
// both, and the server counts their room before it claims). Each is still fenced on its own by
// the server. Outcomes are known only here, so through a server outage they are retried until
// the server answers.
import { refusedForGood, type ReleaseResult, type SkipjackClient } from '../protocol/client.js';
import { MAX_BATCH, type ReleaseItem } from '../protocol/schemas.js';
import { Backoff, sleep } from './backoff.js';

interface Pending {
  item: ReleaseItem;
  resolve: (answer: ReleaseAnswer) => void;
}

/** 'released', or 'refused' with the server's reason (the lease was lost meanwhile). */
export type ReleaseAnswer = { ok: true } | { ok: false; error: string; message: string };

/** Releases taken along by a claim: settle them with the claim's answer, or give them back. */
export interface CarriedReleases {
  items: ReleaseItem[];
  settle(results: ReleaseResult[] | undefined): void;
  giveBack(): void;
}

export class ReleaseBatcher {
  private queue: Pending[] = [];
  /** How many at the front of the queue are in a /releases request now. */
  private inFlight = 0;
  private sending: Promise<void> | null = null;
  /** While the claim loop gathers room, queued outcomes wait for its next claim to carry them. */
  private held: Promise<void> | null = null;
  /** Set when the worker stops waiting for the server: outcomes are dropped, not sent. */
  private abandoned: string | null = null;

  constructor(
    private client: SkipjackClient,
    private onRetry: (err: Error, delayMs: number) => void,
    /** Called when an outcome is queued, so a claim loop waiting for room can wake. */
    private onQueued: () => void = () => {},
    private lingerMs = 2,
  ) {}

  release(item: ReleaseItem): Promise<ReleaseAnswer> {
    if (this.abandoned) return Promise.resolve(dropped(this.abandoned));
    return new Promise((resolve) => {
      this.queue.push({ item, resolve });
      this.sending ??= this.sendAll();
      this.onQueued();
    });
  }

  /** Holds queued outcomes back from their own request until the returned function is called. */
  hold(): () => void {
    let end!: () => void;
    const held = new Promise<void>((resolve) => (end = resolve));
    this.held = held;
    return () => {
      if (this.held === held) this.held = null;
      end();
    };
  }

  /**
   * Takes back a job's outcome that is queued and not being sent, answered as refused: its lease
   * is gone, and the server would refuse it as stale. False when it is not there to take.
   */
  withdraw(jobId: number, message: string): boolean {
    const i = this.queue.findIndex((p, at) => at >= this.inFlight && p.item.jobId === jobId);
    if (i < 0) return false;
    const [taken] = this.queue.splice(i, 1);
    taken.resolve({ ok: false, error: 'lease_expired', message });
    return true;
  }

  /**
   * Stops sending: every outcome waiting, or waiting for another try, is answered as dropped (its
   * job runs again once its lease expires on the server). One being sent keeps its answer if it gets one.
   */
  abandon(message: string): void {
    this.abandoned = message;
    for (const p of this.queue.splice(this.inFlight)) p.resolve(dropped(message));
  }

  /** Outcomes queued and not yet being sent. */
  queuedCount(): number {
    return this.queue.length - this.inFlight;
  }

  /** Outcomes queued and not yet being sent, for a claim to carry. */
  takeForClaim(): CarriedReleases {
    const taken = this.queue.splice(this.inFlight, MAX_BATCH);
    return {
      items: taken.map((p) => p.item),
      settle: (results) => taken.forEach((p, i) => p.resolve(answer(results?.[i]))),
      giveBack: () => {
        this.queue.push(...taken);
        this.sending ??= this.sendAll();
      },
    };
  }

  private async sendAll(): Promise<void> {
    await sleep(this.lingerMs);
    // After a hold, the claim loop takes what is queued first (it runs on, we wait a linger).
    while (this.held) {
      await this.held;
      await sleep(this.lingerMs);
    }
    const backoff = new Backoff(100, 5000);
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, MAX_BATCH);
      this.inFlight = batch.length;
      try {
        const { results } = await this.client.request<{ results: ReleaseResult[] }>('POST', '/releases', {
          releases: batch.map((p) => p.item),
        });
        batch.forEach((p, i) => p.resolve(answer(results[i])));
        backoff.reset();
      } catch (err) {
        if (this.abandoned) {
          batch.forEach((p) => p.resolve(dropped(this.abandoned!)));
        } else if (!refusedForGood(err)) {
          this.inFlight = 0;
          const delay = backoff.next();
          this.onRetry(err as Error, delay);
          await sleep(delay);
          continue;
        } else {
          // The batch itself was refused (a bug, not an outage): answer each so no job hangs.
          batch.forEach((p) => p.resolve({ ok: false, error: err.code ?? 'refused', message: err.message }));
        }
      }
      this.queue.splice(0, batch.length);
      this.inFlight = 0;
    }
    this.sending = null;
  }
}

function answer(r: ReleaseResult | undefined): ReleaseAnswer {
  if (!r) return { ok: false, error: 'no_answer', message: 'the server gave no answer for this release' };
  return r.ok ? { ok: true } : { ok: false, error: r.error, message: r.message };
}

const dropped = (message: string): ReleaseAnswer => ({ ok: false, error: 'dropped', message });

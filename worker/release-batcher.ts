// Releases go up in batches: outcomes that end within a few milliseconds of each other share
// one request. Each is still fenced on its own by the server. Outcomes are known only here, so
// through a server outage they are retried until the server answers.
import { ApiRequestError, type SkipjackClient } from '../protocol/client.js';
import type { Release } from '../protocol/schemas.js';
import { Backoff, sleep } from './backoff.js';

interface Pending {
  jobId: number;
  release: Release;
  resolve: (answer: ReleaseAnswer) => void;
}

/** 'released', or 'refused' with the server's reason (the lease was lost meanwhile). */
export type ReleaseAnswer = { ok: true } | { ok: false; error: string; message: string };

const MAX_BATCH = 500;

export class ReleaseBatcher {
  private queue: Pending[] = [];
  private sending: Promise<void> | null = null;

  constructor(private client: SkipjackClient, private onRetry: (err: Error, delayMs: number) => void, private lingerMs = 2) {}

  release(jobId: number, release: Release): Promise<ReleaseAnswer> {
    return new Promise((resolve) => {
      this.queue.push({ jobId, release, resolve });
      this.sending ??= this.sendAll();
    });
  }

  private async sendAll(): Promise<void> {
    await sleep(this.lingerMs);
    const backoff = new Backoff(100, 5000);
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, MAX_BATCH);
      try {
        const { results } = await this.client.request<{ results: ({ jobId: number; ok: true } | { jobId: number; ok: false; error: string; message: string })[] }>(
          'POST', '/releases', { releases: batch.map((p) => ({ jobId: p.jobId, ...p.release })) });
        this.queue.splice(0, batch.length);
        batch.forEach((p, i) => p.resolve(results[i].ok ? { ok: true } : { ok: false, error: (results[i] as any).error, message: (results[i] as any).message }));
        backoff.reset();
      } catch (err) {
        if (err instanceof ApiRequestError && err.status < 500) {
          // The batch itself was refused (a bug, not an outage): answer each so no job hangs.
          this.queue.splice(0, batch.length);
          batch.forEach((p) => p.resolve({ ok: false, error: err.code ?? 'refused', message: err.message }));
          continue;
        }
        const delay = backoff.next();
        this.onRetry(err as Error, delay);
        await sleep(delay);
      }
    }
    this.sending = null;
  }
}

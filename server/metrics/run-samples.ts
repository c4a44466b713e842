// Queue wait and run time, observed off the hot path: claims and releases note (job, run) here,
// and one statement a second (or at a scrape) reads their times by primary key. The claim and
// release functions stay as they are; a sample is at most a second late.
import type { Histogram } from 'prom-client';
import type { Db } from '../db.js';
import { queueWaits, runTimes, type RunRef } from '../store/metrics.js';
import type { BoundedLabels } from './labels.js';

/** Past this many unread samples, new ones are dropped: memory stays bounded if the database lags. */
const MAX_PENDING = 50_000;

export class RunSamples {
  private started: RunRef[] = [];
  private ended: (RunRef & { outcome: string })[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly queues: BoundedLabels,
    private readonly wait: Histogram<'queue'>,
    private readonly runTime: Histogram<'queue' | 'outcome'>,
    private readonly onError: (err: unknown) => void,
    private db: Db | null = null,
    private readonly intervalMs = 1000,
  ) {}

  attach(db: Db): void {
    this.db = db;
  }

  claimed(runs: RunRef[]): void {
    for (const r of runs) if (this.started.length < MAX_PENDING) this.started.push(r);
    this.schedule();
  }

  released(runs: (RunRef & { outcome: string })[]): void {
    for (const r of runs) if (this.ended.length < MAX_PENDING) this.ended.push(r);
    this.schedule();
  }

  /** Reads every noted run's times and observes them; a scrape awaits it first. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.flushing = this.flushing.then(() => this.read()).catch(this.onError);
    return this.flushing;
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.timer || !this.db) return;
    this.timer = setTimeout(() => void this.flush(), this.intervalMs);
    this.timer.unref();
  }

  private async read(): Promise<void> {
    const db = this.db;
    if (!db) return;
    const [started, ended] = [this.started, this.ended];
    this.started = [];
    this.ended = [];
    for (const w of await queueWaits(db, started)) this.wait.observe({ queue: this.queues.label(w.queue) }, w.seconds);
    for (const r of await runTimes(db, ended))
      this.runTime.observe({ queue: this.queues.label(r.queue), outcome: r.outcome }, r.seconds);
  }
}

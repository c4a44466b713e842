// Prometheus metrics (docs/metrics.md lists them). A registry per server instance keeps test
// servers from colliding. Every label's values are bounded (labels.ts): a queue only once it is
// in the jobs table and within the cap, a route only as the Express pattern that matched.
import client from 'prom-client';
import type { Db } from '../db.js';
import { BoundedLabels } from './labels.js';
import { RunSamples } from './run-samples.js';
import { ScrapeReader } from './scrape.js';

export interface MetricsOptions {
  /** The long-polls asleep in this process, read when scraped. */
  sleepingLongPolls?: () => number;
  /** Queues with a series of their own; the rest share "other". */
  queueCap?: number;
  /** A worker heard from within this long has capacity series. */
  workerWindowMs?: number;
  onError?: (err: unknown) => void;
}

const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const WAIT_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14_400, 86_400];
const RUN_BUCKETS = [0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14_400, 86_400];

export function createMetrics(db: Db | null, options: MetricsOptions = {}) {
  const { sleepingLongPolls = () => 0, queueCap = 100, workerWindowMs = 30_000, onError = () => {} } = options;
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const counter = <L extends string>(name: string, help: string, labelNames: L[] = []) =>
    new client.Counter<L>({ name, help, labelNames, registers });
  const gauge = <L extends string>(name: string, help: string, labelNames: L[]) =>
    new client.Gauge<L>({ name, help, labelNames, registers });
  const histogram = <L extends string>(name: string, help: string, labelNames: L[], buckets: number[]) =>
    new client.Histogram<L>({ name, help, labelNames, buckets, registers });
  const queues = new BoundedLabels(queueCap);

  const queueWait = histogram(
    'skipjack_queue_wait_seconds',
    'From a run being due (run_at) to its start',
    ['queue'],
    WAIT_BUCKETS,
  );
  const runTime = histogram(
    'skipjack_run_seconds',
    'From a run start to its release, by outcome',
    ['queue', 'outcome'],
    RUN_BUCKETS,
  );
  const scrapeGauges = {
    jobs: gauge('skipjack_jobs', 'Jobs not yet ended, by queue and state (pending, assigned, running)', [
      'queue',
      'state',
    ]),
    oldestPending: gauge(
      'skipjack_oldest_pending_seconds',
      'How long the longest-waiting due pending job of the queue has waited',
      ['queue'],
    ),
    capacity: gauge('skipjack_worker_capacity', "A live worker's capacity, by resource", [
      'worker',
      'name',
      'resource',
    ]),
    allocated: gauge('skipjack_worker_allocated', "What a live worker's held jobs use, by resource", [
      'worker',
      'name',
      'resource',
    ]),
  };
  const samples = new RunSamples(queues, queueWait, runTime, onError, db);
  const scrape = db ? new ScrapeReader(db, queues, scrapeGauges, workerWindowMs) : null;

  return {
    registry,
    queues,
    samples,
    /** The exposition text: database gauges and noted runs read first. */
    async render(): Promise<string> {
      // A database that cannot be read leaves its gauges as last read: the process's own metrics still serve.
      await Promise.all([scrape?.read().catch(onError), samples.flush()]);
      return registry.metrics();
    },
    enqueued: counter('skipjack_jobs_enqueued_total', 'Jobs enqueued', ['queue']),
    claimed: counter('skipjack_jobs_claimed_total', 'Jobs claimed by workers'),
    released: counter('skipjack_jobs_released_total', 'Runs released, by outcome', ['outcome']),
    reaped: counter('skipjack_leases_expired_total', 'Leases the reaper took back'),
    handedOff: counter(
      'skipjack_jobs_handed_off_total',
      'Jobs an enqueue claimed, in its own statement, for a long-poll asleep on this server (the oldest that worker could run: the new ones, or pending ones before them)',
    ),
    sleeping: new client.Gauge({
      name: 'skipjack_long_polls_sleeping',
      help: 'Long-poll claims asleep on this server, waiting for a job',
      registers,
      collect() {
        this.set(sleepingLongPolls());
      },
    }),
    staleLease: counter('skipjack_stale_lease_total', 'Worker requests refused for a stale lease token'),
    wakeupsSkipped: counter(
      'skipjack_job_wakeups_skipped_total',
      'Job NOTIFYs that woke no long-poll on this server: no job was pending when they came (an enqueue handed it off, or another worker took it)',
    ),
    placementRefusals: counter(
      'skipjack_placement_refusals_total',
      'Jobs refused as unplaceable, by the filter that refused them (deadline: a placement deadline missed)',
      ['reason'],
    ),
    claimLatency: histogram(
      'skipjack_claim_seconds',
      'POST /claims from arrival to answer; long_poll says whether it could wait',
      ['long_poll'],
      DURATION_BUCKETS,
    ),
    http: histogram(
      'skipjack_http_request_seconds',
      'HTTP requests by method, route pattern and status',
      ['method', 'route', 'status'],
      DURATION_BUCKETS,
    ),
  };
}
export type Metrics = ReturnType<typeof createMetrics>;

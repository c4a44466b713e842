// Prometheus metrics. A registry per server instance keeps test servers from colliding.
import client from 'prom-client';

/** `sleepingLongPolls` counts the long-polls asleep in this process, read when scraped. */
export function createMetrics(sleepingLongPolls: () => number = () => 0) {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  const counter = (name: string, help: string, labelNames: string[] = []) =>
    new client.Counter({ name, help, labelNames, registers: [registry] });
  return {
    registry,
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
      registers: [registry],
      collect() {
        this.set(sleepingLongPolls());
      },
    }),
    staleLease: counter('skipjack_stale_lease_total', 'Worker requests refused for a stale lease token'),
    wakeupsSkipped: counter(
      'skipjack_job_wakeups_skipped_total',
      'Job NOTIFYs that woke no long-poll on this server: no job was pending when they came (an enqueue handed it off, or another worker took it)',
    ),
  };
}
export type Metrics = ReturnType<typeof createMetrics>;

// This worker as the server knows it: the id and key it registered under, and the terms the
// server set then (heartbeat interval, lease TTL, held heartbeats). The loops read them afresh
// each time, since registering again (a reset server database) changes them.
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { ApiRequestError, UnreachableError, type SkipjackClient } from '../protocol/client.js';
import { Backoff, sleep } from './backoff.js';
import type { WorkerOptions } from './options.js';

export type RegistrationOptions = Pick<WorkerOptions, 'name' | 'region' | 'labels' | 'capacity' | 'queues' | 'log'>;

export class Registration {
  id = '';
  /** Proves to the server that this worker is itself (its own deregistration); from a server before 009, none. */
  key: string | undefined;
  heartbeatMs = 10_000;
  /** The server's lease TTL (from the registration): a lease not extended for this long is gone. */
  leaseTtlMs = 30_000;
  /** The server holds a heartbeat until it has a cancel or a drain for us, so both arrive at once. */
  heartbeatWaits = false;
  /** The worker's logger, naming its id once it has one. */
  log: Logger;

  constructor(
    private client: Pick<SkipjackClient, 'register' | 'baseUrl'>,
    private opts: RegistrationOptions,
    private slots: number,
  ) {
    this.log = opts.log;
  }

  /** Registers, retrying while the server is unreachable, until `stopClaiming` (the drain) aborts. */
  async register(stopClaiming: AbortSignal): Promise<void> {
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
        await sleep(delay, stopClaiming);
        if (stopClaiming.aborted) throw new Error('stopped before the worker could register', { cause: err });
      }
    }
  }
}

/** The server's own answer that it does not know the worker, not a proxy's 404. */
export const isUnknownWorker = (err: unknown) =>
  err instanceof ApiRequestError && err.status === 404 && err.code === 'unknown_worker';

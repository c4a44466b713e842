// One LISTEN connection per server process, fanned out to in-process waiters. Long-polling
// claimers sleep here instead of querying in a loop.
import pg from 'pg';
import type { Logger } from 'pino';

type Listener = (payload: string) => void;
/** In a job NOTIFY's payload, no queue: a wake-up for all. */
const ANY_QUEUE = '';
const channels = [
  'skipjack_jobs',
  'skipjack_assigned',
  'skipjack_drain',
  'skipjack_cancel',
  'skipjack_logs',
  'skipjack_end_poll',
] as const;
export type Channel = (typeof channels)[number];

export class NotifyHub {
  private client: pg.Client | null = null;
  private listeners = new Map<Channel, Set<Listener>>();
  private timers = new Set<NodeJS.Timeout>();
  private closed = false;
  /** Counts job wake-ups, so a claimer can tell whether one came while it was querying. */
  jobsSeq = 0;
  /** Called when the due timer fires, and after a reconnect: finds the next due time. */
  onDue: (() => void) | null = null;
  /** Called when a job NOTIFY wakes nobody, because no job was pending by the time it came. */
  onWakeSkipped: (() => void) | null = null;
  private checking = false;
  private queuesToCheck = new Set<string>();
  private jobsToCheck = new Set<string>();
  private dueTimer: NodeJS.Timeout | null = null;
  private nextDue = Infinity;

  private probeTimer: NodeJS.Timeout | null = null;

  constructor(
    private connectionString: string,
    private log: Logger,
    /** A LISTEN connection cut half-open (a NAT's table, a failover) says nothing: ask it this often. */
    private probe = { everyMs: 15_000, timeoutMs: 5_000 },
  ) {}

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      application_name: 'skipjack-listen',
      keepAlive: true,
      connectionTimeoutMillis: this.probe.timeoutMs * 2,
    });
    client.on('notification', (n) => this.notified(n.channel as Channel, n.payload ?? ''));
    client.on('error', (err) => this.reconnect(client, err));
    try {
      await client.connect();
      for (const ch of channels) await client.query(`LISTEN ${ch}`);
    } catch (err) {
      cutOff(client);
      throw err;
    }
    this.client = client;
    this.scheduleProbe(client);
  }

  /** TCP keep-alive takes minutes to notice a dead peer; a query that goes unanswered tells sooner. */
  private scheduleProbe(client: pg.Client) {
    if (this.probeTimer) clearTimeout(this.probeTimer);
    if (!(this.probe.everyMs > 0)) return; // 0: no probes
    this.probeTimer = setTimeout(async () => {
      if (this.closed || this.client !== client) return;
      let timer: NodeJS.Timeout | undefined;
      const unanswered = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer to a probe in ${this.probe.timeoutMs} ms`)),
          this.probe.timeoutMs,
        );
      });
      try {
        await Promise.race([client.query('SELECT 1'), unanswered]);
        this.scheduleProbe(client);
      } catch (err) {
        this.reconnect(client, err as Error);
      } finally {
        clearTimeout(timer);
      }
    }, this.probe.everyMs);
  }

  // A dropped LISTEN connection would leave every long-poll asleep until its timeout: reconnect,
  // then wake everyone so nothing that arrived meanwhile is missed.
  private reconnect(client: pg.Client, err: Error) {
    if (this.closed || this.client !== client) return;
    this.client = null;
    this.log.warn({ err: err.message }, 'LISTEN connection lost; reconnecting');
    cutOff(client); // end() would wait for a peer that may never answer
    const retry = (delay: number) => {
      const t = setTimeout(async () => {
        this.timers.delete(t);
        if (this.closed) return;
        try {
          await this.connect();
          this.log.info('LISTEN connection restored');
          for (const ch of channels) this.dispatch(ch, '');
          this.onDue?.(); // delayed jobs announced while we were away
        } catch {
          retry(Math.min(delay * 2, 5000));
        }
      }, delay);
      this.timers.add(t);
    };
    retry(100);
  }

  private notified(channel: Channel, payload: string) {
    // With nobody asleep here there is nobody to spare a claim: no query, as before.
    const sleepers = this.listeners.get('skipjack_jobs')?.size ?? 0;
    if (channel === 'skipjack_jobs' && sleepers > 0 && dueLaterMs(payload) === null)
      return void this.wakeIfPending(payload);
    this.dispatch(channel, payload);
  }

  /**
   * Every long-poll asleep here wakes for a job NOTIFY and claims, so one job used to cost a
   * claim per sleeping worker. Most such jobs are gone by the time the NOTIFY comes: an enqueue
   * hands its job to a sleeping claim in the insert's own statement. So first one query, on this
   * connection: nobody wakes unless the NOTIFY's job is still pending and due, or, for a NOTIFY
   * that names no job (a bulk insert), some job of its queue. One query at a time; the jobs and
   * queues of NOTIFYs that come meanwhile go in the next.
   */
  private async wakeIfPending(payload: string): Promise<void> {
    const [queue, , id] = payload.split(' ');
    if (id) this.jobsToCheck.add(id);
    else this.queuesToCheck.add(queue); // '' (ANY_QUEUE) from a NOTIFY without a queue
    if (this.checking) return;
    this.checking = true;
    try {
      while ((this.queuesToCheck.size > 0 || this.jobsToCheck.size > 0) && !this.closed) {
        const queues = [...this.queuesToCheck];
        const jobs = [...this.jobsToCheck];
        this.queuesToCheck.clear();
        this.jobsToCheck.clear();
        if (await this.nonePending(queues, jobs)) this.onWakeSkipped?.();
        else this.dispatchDue('');
      }
    } finally {
      this.checking = false;
    }
  }

  /** True only when the database says so: on any doubt, wake. */
  private async nonePending(queues: string[], jobs: string[]): Promise<boolean> {
    const client = this.client;
    if (!client) return false;
    const due = `SELECT 1 FROM jobs WHERE state = 'pending' AND run_at <= now()`;
    const any: string[] = [];
    const values: unknown[] = [];
    if (queues.includes(ANY_QUEUE)) any.push(`EXISTS (${due})`);
    else if (queues.length > 0) any.push(`EXISTS (${due} AND queue = ANY ($${values.push(queues)}::text[]))`);
    if (jobs.length > 0) any.push(`EXISTS (${due} AND id = ANY ($${values.push(jobs)}::bigint[]))`);
    try {
      const { rows } = await client.query(`SELECT NOT (${any.join(' OR ')}) AS none`, values);
      return rows[0].none === true;
    } catch {
      return false;
    }
  }

  private dispatch(channel: Channel, payload: string) {
    if (channel === 'skipjack_jobs') return this.dispatchDue(payload);
    if (channel === 'skipjack_assigned') this.jobsSeq++;
    for (const fn of [...(this.listeners.get(channel) ?? [])]) fn(payload);
  }

  /** A job due later arms a timer, so its claimers wake when it becomes due. */
  private dispatchDue(payload: string) {
    const dueMs = dueLaterMs(payload);
    if (dueMs !== null) return this.armDue(dueMs);
    this.jobsSeq++;
    for (const fn of [...(this.listeners.get('skipjack_jobs') ?? [])]) fn(payload);
  }

  /**
   * One timer, for the earliest due time known: a million delayed jobs cost one timer, not a
   * million. When it fires, `onDue` looks up the next due time in the database.
   */
  armDue(dueMs: number): void {
    if (this.closed || dueMs >= this.nextDue) return;
    this.nextDue = dueMs;
    if (this.dueTimer) clearTimeout(this.dueTimer);
    this.dueTimer = setTimeout(
      () => {
        this.dueTimer = null;
        this.nextDue = Infinity;
        this.dispatchDue('');
        this.onDue?.();
      },
      Math.min(Math.max(0, dueMs - Date.now()) + 5, 2 ** 31 - 1),
    );
  }

  on(channel: Channel, fn: Listener): () => void {
    let set = this.listeners.get(channel);
    if (!set) this.listeners.set(channel, (set = new Set()));
    set.add(fn);
    return () => set!.delete(fn);
  }

  /**
   * Resolves true when one of `channels` fires with a payload `accept` takes, false after `ms` or
   * once one of `signals` aborts. It listens to each signal itself: AbortSignal.any, on a
   * long-poll's way out, cost a hand-off's job 0.1 ms of its way to the worker (bench/ latency).
   */
  wait(
    channels: Channel | Channel[],
    ms: number,
    accept: (payload: string) => boolean = () => true,
    signals: AbortSignal[] = [],
  ): Promise<boolean> {
    if (signals.some((s) => s.aborted)) return Promise.resolve(false);
    return new Promise((resolve) => {
      const finish = (woken: boolean) => {
        clearTimeout(timer);
        for (const off of offs) off();
        for (const s of signals) s.removeEventListener('abort', onAbort);
        resolve(woken);
      };
      const onAbort = () => finish(false);
      const offs = (Array.isArray(channels) ? channels : [channels]).map((ch) =>
        this.on(ch, (p) => {
          if (accept(p)) finish(true);
        }),
      );
      const timer = setTimeout(() => finish(false), ms);
      for (const s of signals) s.addEventListener('abort', onAbort);
    });
  }

  /** Wakes every claimer as if a job had just arrived. */
  wakeJobs(): void {
    this.dispatchDue('');
  }

  /** Waits for a job wake-up after `sinceSeq`; at once if one already came. */
  waitForJobs(sinceSeq: number, ms: number, signals: AbortSignal[] = []): Promise<boolean> {
    if (this.jobsSeq > sinceSeq || this.closed) return Promise.resolve(true);
    return this.wait(['skipjack_jobs', 'skipjack_assigned'], ms, () => true, signals);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.dueTimer) clearTimeout(this.dueTimer);
    if (this.probeTimer) clearTimeout(this.probeTimer);
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const ch of channels) this.dispatch(ch, 'closing');
    this.listeners.clear();
    const client = this.client;
    this.client = null;
    if (!client) return;
    // A goodbye to a half-open peer is never answered: wait a moment for it, then cut.
    const ended = client.end().then(
      () => true,
      () => true,
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.probe.timeoutMs)));
    if (!(await Promise.race([ended, late]))) cutOff(client);
    clearTimeout(timer);
  }
}

/** When a job NOTIFY's job becomes due ("queue dueMs"), if that is still to come. */
function dueLaterMs(payload: string): number | null {
  const dueMs = Number(payload.split(' ')[1]);
  return Number.isFinite(dueMs) && dueMs > Date.now() ? dueMs : null;
}

/** Drops a connection at once, without the goodbye that a half-open peer would never answer. */
function cutOff(client: pg.Client) {
  client.removeAllListeners('notification');
  client.on('error', () => {});
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  client.end().catch(() => {});
}

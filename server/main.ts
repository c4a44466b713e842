// Starts one server: migrations, the LISTEN hub, background loops and HTTP.
// Layers, each importing only those below it: app.ts → routes/ (HTTP; releases.ts is what two
// route files share) → long-poll/ (waiting in this process) → store/ (SQL of the API's
// operations) → placement/ (settings, worker capacity, the central scheduler) → db.ts.
// loops/ (leader-only ticks) sits beside routes/; context.ts only names the types they all get.
import { setMaxListeners } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import pino, { type Logger } from 'pino';
import { createApp } from './app.js';
import type { ServerConfig } from './config.js';
import { createDb, migrateToLatest } from './db.js';
import { startLeaderLoop, type Loop } from './loops/leader-loop.js';
import { createMetrics, type Metrics } from './metrics/index.js';
import { NotifyHub } from './long-poll/notify-hub.js';
import { scheduleOnce, type ScanCursor } from './placement/scheduler.js';
import { hasCentralQueues, loadPlacementSettings } from './placement/settings.js';
import { startRetention } from './loops/retention.js';
import { startScheduleLoop } from './loops/schedules.js';
import { reaperTick } from './loops/reaper-tick.js';
import { workerHeartbeats, type Heartbeat } from './store/workers.js';
import { MicroBatcher } from './long-poll/micro-batcher.js';
import { IdleClaims } from './long-poll/idle-claims.js';
import { SleepingClaims } from './long-poll/sleeping-claims.js';
import { WaitingPolls } from './long-poll/waiting-polls.js';
import { PreparedStatements } from './store/prepared.js';
import { KnownWorkers } from './placement/workers.js';
import { startDueWakeups } from './loops/due-wakeups.js';

export interface RunningServer {
  url: string;
  port: number;
  /** The counters /metrics serves, for a process that embeds the server. */
  metrics: Metrics;
  /** The Express app, whose router lists the routes served (the OpenAPI test walks it). */
  app: ReturnType<typeof createApp>;
  close(): Promise<void>;
}

export const REAPER_LOCK = 0x5e1ac0de;
export const SCHEDULER_LOCK = 0x5e1ac0df;

export async function startServer(
  config: ServerConfig,
  log: Logger = pino({ level: config.logLevel }),
): Promise<RunningServer> {
  if (!config.databaseUrl) throw new Error('DATABASE_URL is not set');
  const applied = await migrate(config.databaseUrl);
  const { db, pool } = createDb(config.databaseUrl, 10, 'skipjack', {
    statementMs: config.statementTimeoutMs,
    connectMs: config.dbConnectTimeoutMs,
  });
  if (applied.length > 0) log.info({ migrations: applied }, 'database migrated');
  const hub = new NotifyHub(config.listenUrl || config.databaseUrl, log, {
    everyMs: config.listenProbeMs,
    timeoutMs: Math.min(5_000, config.listenProbeMs),
  });
  await hub.start();
  const sleepingClaims = new SleepingClaims();
  const metrics = createMetrics(db, {
    sleepingLongPolls: () => sleepingClaims.size,
    workerWindowMs: config.workerGoneAfterMs,
    onError: (err) => log.warn({ err }, 'metrics: a database read failed'),
  });
  hub.onWakeSkipped = () => metrics.wakeupsSkipped.inc();
  const placement = await loadPlacementSettings(config.placement, config.placementMode);
  const closing = new AbortController();
  // Every open long-poll listens on this one signal; hundreds of them are normal, not a leak.
  setMaxListeners(0, closing.signal);
  // Heartbeats wait at most a tenth of the lease TTL (and a second) to share a statement.
  const heartbeats = new MicroBatcher(
    (beats: Heartbeat[]) => workerHeartbeats(db, beats, config.leaseTtlMs),
    Math.min(1000, config.leaseTtlMs / 10),
  );
  const schedules = startScheduleLoop(db, log, config.schedulePollMs);
  const app = createApp({
    db,
    statements: new PreparedStatements(pool, (err) =>
      log.warn(
        { err: err.message },
        'named statements do not last between calls here (a pooler in transaction mode: PgBouncer before 1.21, or without max_prepared_statements?); using unnamed ones from now on',
      ),
    ),
    hub,
    config,
    log,
    metrics,
    placement,
    heartbeats,
    idleClaims: new IdleClaims(),
    sleepingClaims,
    waitingPolls: new WaitingPolls(),
    knownWorkers: new KnownWorkers(db, placement.knownWorkerWindowMs),
    closing: closing.signal,
    pokeSchedules: () => schedules.poke(),
  });
  const dueWakeups = startDueWakeups(db, hub);
  const loops: Loop[] = [
    schedules,
    startLeaderLoop(db, log, { name: 'reaper', lockKey: REAPER_LOCK, intervalMs: config.reaperIntervalMs }, (trx) =>
      reaperTick(trx, { goneAfterMs: config.workerGoneAfterMs, placement, log, metrics }),
    ),
  ];
  if (config.retentionMs > 0 || config.workerRetentionMs > 0)
    loops.push(startRetention(db, log, { jobsMs: config.retentionMs, workersMs: config.workerRetentionMs }));
  if (hasCentralQueues(placement)) {
    const cursor: ScanCursor = {}; // where the last pass ran out of its read budget
    loops.push(
      startLeaderLoop(
        db,
        log,
        { name: 'scheduler', lockKey: SCHEDULER_LOCK, intervalMs: placement.schedulerIntervalMs },
        async (trx) => {
          const { assigned } = await scheduleOnce(trx, placement, config.workerGoneAfterMs, { cursor });
          for (const a of assigned) log.info({ jobId: a.jobId, workerId: a.workerId }, 'job assigned');
        },
      ),
    );
  }
  const server = await listen(app, config);
  const connections = trackConnections(server);
  const port = (server.address() as AddressInfo).port;
  const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${port}`;
  log.info({ url, auth: config.tokens.byHash.size > 0 }, 'skipjack server listening');
  if (config.tokens.byHash.size === 0 && !isLoopback(config.host)) {
    log.warn(
      { host: config.host },
      'no SKIPJACK_TOKENS set and listening beyond loopback: anyone who can reach this port can run commands on your workers',
    );
  }
  return {
    url,
    port,
    metrics,
    app,
    async close() {
      closing.abort();
      metrics.samples.stop();
      heartbeats.flush();
      dueWakeups.stop();
      await Promise.all(loops.map((l) => l.stop()));
      await hub.close();
      await closeHttp(server, connections, config.stopGraceMs, log);
      await db.destroy();
      log.info('skipjack server stopped');
    },
  };
}

function listen(app: ReturnType<typeof createApp>, config: ServerConfig): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = app.listen(config.port, config.host, (err?: Error) => (err ? reject(err) : resolve(server)));
    server.keepAliveTimeout = 65_000;
  });
}

const isLoopback = (host: string) => host === 'localhost' || host === '::1' || host.startsWith('127.');

/** Every open connection, for the stop (Node's own list is private). */
function trackConnections(server: Server): Set<Socket> {
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  return open;
}

// Keep-alive sockets become idle as their last response ends; close each as it does, and cut
// whatever is still open after a grace. A connection that has sent nothing (a client's pooled
// socket whose request was called off, as a stopping worker's next long-poll is) is not idle to
// Node, and held every stop of `npm start` for the whole grace.
async function closeHttp(server: Server, connections: Set<Socket>, graceMs: number, log: Logger): Promise<void> {
  const sweep = () => {
    server.closeIdleConnections();
    for (const socket of connections) if (socket.bytesRead === 0) socket.destroy();
  };
  const timer = setInterval(sweep, 20);
  const cut = setTimeout(() => {
    log.warn(
      { connections: connections.size, graceMs },
      'connections still busy at the end of the stop grace; cutting them',
    );
    server.closeAllConnections();
  }, graceMs);
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  sweep();
  await closed;
  clearInterval(timer);
  clearTimeout(cut);
}

/** Migrations on a connection of their own, without the statement timeout: one may rewrite a big table. */
async function migrate(databaseUrl: string): Promise<string[]> {
  const { db } = createDb(databaseUrl, 1, 'skipjack-migrate');
  try {
    return await migrateToLatest(db);
  } finally {
    await db.destroy();
  }
}

// What every route needs: the database, the wake-up hub, settings and the logger.
import type { Logger } from 'pino';
import type { ServerConfig } from './config.js';
import type { Db } from './db.js';
import type { PreparedStatements } from './store/prepared.js';
import type { NotifyHub } from './long-poll/notify-hub.js';
import type { Metrics } from './metrics/index.js';
import type { PlacementSettings } from './placement/settings.js';
import type { IdleClaims } from './long-poll/idle-claims.js';
import type { SleepingClaims } from './long-poll/sleeping-claims.js';
import type { WaitingPolls } from './long-poll/waiting-polls.js';
import type { KnownWorkers } from './placement/workers.js';
import type { MicroBatcher } from './long-poll/micro-batcher.js';
import type { Heartbeat } from './store/workers.js';
import type { WorkerHeartbeatResponse } from '../protocol/types.js';

export interface AppContext {
  db: Db;
  /** Named statements on the same pool, for the few that are mostly planning. */
  statements: PreparedStatements;
  hub: NotifyHub;
  config: ServerConfig;
  log: Logger;
  metrics: Metrics;
  placement: PlacementSettings;
  idleClaims: IdleClaims;
  /** Long-polls asleep here, which an enqueue may hand its jobs to. */
  sleepingClaims: SleepingClaims;
  /** Each worker's long-poll waiting here, which a newer claim from the worker ends. */
  waitingPolls: WaitingPolls;
  knownWorkers: KnownWorkers;
  /** Worker heartbeats, gathered for a moment and written in one statement. */
  heartbeats: MicroBatcher<Heartbeat, WorkerHeartbeatResponse | null>;
  /** Aborted when the server starts to close: long-polls answer at once, empty. */
  closing: AbortSignal;
  /** A schedule changed: this server's schedule loop looks again now. */
  pokeSchedules: () => void;
}

// An example user plugin: a filter and a ranker factory about how recently a worker was heard from.
// Load it with registerPlugins(await import('./heartbeat-freshness.js')), then name its plugins in a spec:
// { "filters": [..., "recent-heartbeat"], "rankers": [{ "name": "fresh-heartbeat", "params": { "staleAfterMs": 20000 } }] }
import type { Filter, Ranker, RankerOptions } from '../types.js';

const MAX_SILENCE_MS = 60_000;

/** Rejects workers silent for over a minute; one fixed reason, so the summary groups them. */
export const recentHeartbeat: Filter = {
  name: 'recent-heartbeat',
  check: (_job, worker, ctx) => (ctx.now - worker.lastSeenAt <= MAX_SILENCE_MS ? null : 'no heartbeat for 60s'),
};

export interface FreshHeartbeatOptions extends RankerOptions {
  /** Silence after which a worker scores 0. Default 30 s. */
  staleAfterMs?: number;
}

/** 100 * max(0, 1 - silence / staleAfterMs): prefers the worker most recently heard from. */
export function freshHeartbeat({ weight = 1, staleAfterMs = 30_000 }: FreshHeartbeatOptions = {}): Ranker {
  if (!(staleAfterMs > 0)) throw new Error(`ranker fresh-heartbeat: staleAfterMs must be > 0, got ${staleAfterMs}`);
  return {
    name: 'fresh-heartbeat',
    weight,
    score: (_job, worker, ctx) => 100 * Math.max(0, 1 - (ctx.now - worker.lastSeenAt) / staleAfterMs),
  };
}

export const filters = [recentHeartbeat];
export const rankers = [freshHeartbeat];

// Idle long-polling workers without the agent's weight: each registers, then loops POST /claims
// {waitMs: 30000} and heartbeats every heartbeatIntervalMs, each heartbeat held by the server for
// that interval where it offers it (heartbeatWaits), like the agent does when idle. A job it is
// given it releases at once.
//   node --import tsx bench/idle-pollers.ts --server URL --count N
// Prints "ready N" once all are registered. Runs until SIGTERM.
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { SkipjackClient } from '../protocol/client.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const client = new SkipjackClient({ baseUrl: arg('server') ?? 'http://127.0.0.1:7070', timeoutMs: 60_000 });
const count = Number(arg('count') ?? 200);
const stop = new AbortController();
// Every in-flight claim links to this one signal.
setMaxListeners(0, stop.signal);
let claims = 0;
let heartbeats = 0;
let errors = 0;

async function poller(i: number, ready: () => void): Promise<void> {
  const w = await client.register({ name: `idle-${i}`, region: 'mad', capacity: { slots: 4 } });
  ready();
  const hb = heartbeatLoop(w.id, w.heartbeatIntervalMs, w.heartbeatWaits === true);
  try {
    while (!stop.signal.aborted) {
      try {
        const { jobs } = await client.claim(w.id, 4, 30_000, stop.signal);
        claims++;
        // A job (the scenario's trickle) is done at once, as a noop executor would do it.
        if (jobs.length > 0)
          await client.request('POST', '/releases', {
            releases: jobs.map((j) => ({ jobId: j.id, leaseToken: j.leaseToken, outcome: 'succeeded', exitCode: 0 })),
          });
      } catch {
        if (stop.signal.aborted) break;
        errors++;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  } finally {
    await hb;
  }
}

/** As the agent heartbeats with no job running: held by the server for the interval where it offers that. */
async function heartbeatLoop(id: string, intervalMs: number, held: boolean): Promise<void> {
  while (!stop.signal.aborted) {
    const sent = Date.now();
    heartbeats++;
    await client.workerHeartbeat(id, [], held ? intervalMs : 0, stop.signal).catch(() => {
      if (!stop.signal.aborted) errors++;
    });
    const left = sent + intervalMs - Date.now();
    if (left > 0) await sleep(left, undefined, { signal: stop.signal }).catch(() => {});
  }
}

let registered = 0;
const all = Array.from({ length: count }, (_, i) =>
  poller(i, () => {
    if (++registered === count) process.stdout.write(`ready ${count}\n`);
  }),
);
process.on('SIGTERM', () => {
  stop.abort();
  process.stdout.write(`stats claims=${claims} heartbeats=${heartbeats} errors=${errors}\n`);
  setTimeout(() => process.exit(0), 100);
});
await Promise.allSettled(all);

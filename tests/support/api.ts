// Helpers shared by the API test files: a running test server's metrics, long-polls and raw posts.
import { sql } from 'kysely';
import type { ApiRequestError, SkipjackClient } from '../../protocol/client.js';
import { until, type TestServer } from './server.js';

/** The HTTP status a client call ends with: 200 when it succeeds. */
export const status = async (p: Promise<unknown>) =>
  p.then(
    () => 200,
    (e: ApiRequestError) => e.status,
  );

export const metric = async (url: string, name: string) =>
  Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? NaN);
export const sleepingLongPolls = (url: string) => metric(url, 'skipjack_long_polls_sleeping');

/** Starts a long-poll claim and resolves, with its answer to come, once the server counts it asleep. */
export async function sleepingClaim(
  client: SkipjackClient,
  url: string,
  workerId: string,
  max: number,
  waitMs: number,
) {
  const before = await sleepingLongPolls(url);
  const answer = client.claim(workerId, max, waitMs);
  await until('the long-poll to sleep', async () => (await sleepingLongPolls(url)) > before);
  return { answer };
}

/** Helpers bound to the test file's server, which its beforeAll starts. */
export function serverHelpers(server: () => TestServer) {
  return {
    register: (name = 'w') =>
      server().client.register({ name, capacity: { cpu: 4000, memoryMb: 4096, diskMb: 10000, slots: 8 } }),
    handedOff: () => metric(server().server.url, 'skipjack_jobs_handed_off_total'),
    insertAndClaimTimes: async (id: number) =>
      (
        await sql<{
          created_at: Date;
          started_at: Date;
        }>`SELECT created_at, started_at FROM jobs WHERE id = ${id}`.execute(server().tdb.db)
      ).rows[0],
    async post(path: string, body: unknown) {
      const res = await fetch(server().server.url + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      return { status: res.status, body: await res.json() };
    },
  };
}

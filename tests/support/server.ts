// A real server on a loopback port over the test file's own database.
import pino from 'pino';
import { SkipjackClient } from '../../protocol/client.js';
import { terminalStates } from '../../protocol/schemas.js';
import { configFromEnv, type ServerConfig } from '../../server/config.js';
import { startServer, type RunningServer } from '../../server/main.js';
import { createTestDatabase, type TestDatabase } from './db.js';

export const quietLog = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

export interface TestServer {
  server: RunningServer;
  client: SkipjackClient;
  tdb: TestDatabase;
  config: ServerConfig;
  close(): Promise<void>;
}

export async function startTestServer(overrides: Partial<ServerConfig> = {}, tdb?: TestDatabase): Promise<TestServer> {
  tdb ??= await createTestDatabase();
  const config = configFromEnv({}, { port: 0, databaseUrl: tdb.url, reaperIntervalMs: 200, ...overrides });
  const server = await startServer(config, quietLog);
  const own = tdb;
  return {
    server,
    client: new SkipjackClient({ baseUrl: server.url }),
    tdb: own,
    config,
    async close() {
      await server.close();
      await own.drop();
    },
  };
}

/** Waits for the job to reach a final state, and returns it. */
export function jobFinished(client: SkipjackClient, id: number, timeoutMs = 20_000) {
  return until(
    `job ${id} to finish`,
    async () => {
      const j = await client.getJob(id);
      return terminalStates.includes(j.state) ? j : undefined;
    },
    timeoutMs,
  );
}

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

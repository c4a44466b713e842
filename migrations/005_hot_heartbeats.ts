import { sql, type Kysely } from 'kysely';

// Heartbeats without index writes. A heartbeat sets only lease_expires_at, for every running job
// of a worker, every third of the lease TTL: the steady write load of a busy cluster. While that
// column was indexed, each extension was a new row version with a new entry in every index that
// covers running jobs (the primary key among them). Not indexed, with room left on each page,
// PostgreSQL updates the row in place (a HOT update). bench/heartbeat-cost.ts, 100 heartbeats of
// 2,000 leases: 92% of the updates in place instead of none, 24-33 ms each instead of 43-45, 9-12
// instead of 19 us of backend CPU per lease, and a table of 5 MB instead of 41 MB at the end.
// - The reaper, and listing running jobs, read the held-jobs index (running or assigned) instead:
//   their rows are the worker slots of the whole cluster, few next to the finished ones;
// - fillfactor 90 leaves that room on pages written from now on. Existing pages get it as they
//   are rewritten (VACUUM FULL or pg_repack, if one wants it at once).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX jobs_lease_expiry_idx;
    ALTER TABLE jobs SET (fillfactor = 90);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE jobs RESET (fillfactor);
    CREATE INDEX jobs_lease_expiry_idx ON jobs (lease_expires_at) WHERE state = 'running';
  `.execute(db);
}

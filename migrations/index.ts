// Migrations are listed here, not discovered on disk, so they work the same under tsx, jest and a bundle.
import type { Migration } from 'kysely';
import * as m001 from './001_initial.js';
import * as m002 from './002_claim_in_one_statement.js';
import * as m003 from './003_lean_claim_and_release.js';
import * as m004 from './004_cached_plans.js';
import * as m005 from './005_hot_heartbeats.js';
import * as m006 from './006_worker_deregistered.js';
import * as m007 from './007_notify_job_ids.js';
import * as m008 from './008_final_run_in_job_row.js';
import * as m009 from './009_worker_keys.js';
import * as m010 from './010_release_without_row_lock.js';
import * as m011 from './011_worker_drain_kept.js';
import * as m012 from './012_no_notify_for_handed_jobs.js';
import * as m013 from './013_start_new_job_at_insert.js';
import * as m014 from './014_live_sql_record.js';
import * as m017 from './017_schedules.js';

export const migrations: Record<string, Migration> = {
  '001_initial': m001,
  '002_claim_in_one_statement': m002,
  '003_lean_claim_and_release': m003,
  '004_cached_plans': m004,
  '005_hot_heartbeats': m005,
  '006_worker_deregistered': m006,
  '007_notify_job_ids': m007,
  '008_final_run_in_job_row': m008,
  '009_worker_keys': m009,
  '010_release_without_row_lock': m010,
  '011_worker_drain_kept': m011,
  '012_no_notify_for_handed_jobs': m012,
  '013_start_new_job_at_insert': m013,
  '014_live_sql_record': m014,
  '017_schedules': m017,
};

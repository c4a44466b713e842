-- Every run of every job: runs whose job went on (job_attempts), the run that ended its job
-- (kept in the job's row alone, see release.sql), and the run in progress.
CREATE OR REPLACE VIEW job_runs AS
  SELECT job_id, attempt, worker_id, started_at, ended_at, outcome, end_reason, exit_code, signal, error
  FROM job_attempts
  UNION ALL
  SELECT j.id, j.runs, j.last_worker_id, j.started_at, j.finished_at, j.state, j.end_reason, j.exit_code, j.signal, j.error
  FROM jobs j
  WHERE j.state IN ('succeeded', 'failed', 'cancelled') AND j.last_worker_id IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM job_attempts a WHERE a.job_id = j.id AND a.attempt = j.runs)
  UNION ALL
  SELECT id, runs, worker_id, started_at, NULL, NULL, NULL, NULL, NULL, NULL
  FROM jobs WHERE state = 'running';

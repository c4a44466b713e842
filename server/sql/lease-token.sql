-- A new lease token: every run's fencing token comes from here (a claim, a start of assigned
-- jobs, a job started at its insert). A simple SQL function, so the planner inlines it.
CREATE OR REPLACE FUNCTION skipjack_new_lease_token() RETURNS uuid
LANGUAGE sql VOLATILE AS $fn$
  SELECT gen_random_uuid()
$fn$;

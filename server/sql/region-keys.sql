-- The region rule, defined once for the SQL side (placement/filters.ts is the same rule for the
-- pipeline and the simulator; tests/integration/sql-definitions.test.ts holds the two together).
-- A job's region_key, a generated column (migration 002), is '' when it may run anywhere, its
-- region when it names one, and '*' when it names a set, which is then checked against
-- jobs.regions. A worker may run the jobs of these keys: '' always; with a region of its own,
-- also that region's and the sets'. A worker without a region runs only jobs that name none.
CREATE OR REPLACE FUNCTION skipjack_region_keys(p_region text) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $fn$
  SELECT CASE WHEN p_region IS NULL THEN ARRAY['']
              WHEN p_region = '*' THEN ARRAY['', '*']
              ELSE ARRAY['', '*', p_region] END
$fn$;

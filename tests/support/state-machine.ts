// The job state machine as docs/state-machine.md lists it, and a recorder that holds every test
// database to it: each state change a statement makes (an insert, an update of state, a delete)
// is written to skipjack_test_transitions, and a test file's database is checked when it drops.
// Changes a test makes itself, through its own connection (FIXTURE_APPLICATION), are not recorded:
// a fixture may insert a finished job or delete one by hand; the server's paths may not.
import { readFileSync } from 'node:fs';
import { sql, type Kysely } from 'kysely';

export interface Transition {
  from: string;
  to: string;
}

const doc = new URL('../../docs/state-machine.md', import.meta.url);

/** The rows of the doc's "Transitions" table: its first two columns, each a `code` span. */
export function documentedTransitions(text = readFileSync(doc, 'utf8')): Transition[] {
  const section = text.split(/^## /m).find((s) => s.startsWith('Transitions'));
  if (!section) throw new Error('docs/state-machine.md has no "## Transitions" section');
  const rows = section.split('\n').filter((line) => /^\|\s*`/.test(line));
  return rows.map((line) => {
    const [from, to] = line
      .split('|')
      .slice(1, 3)
      .map((cell) => cell.trim().replace(/^`|`$/g, ''));
    return { from, to };
  });
}

/** The application_name of a test's own connections (tests/support/db.ts). */
export const FIXTURE_APPLICATION = 'skipjack-test-fixture';

export const key = (t: Transition) => `${t.from} -> ${t.to}`;

/** Installs the recorder: an append-only table (no counter rows that concurrent writers would lock). */
export async function installTransitionRecorder<DB>(db: Kysely<DB>): Promise<void> {
  await sql`
    CREATE TABLE skipjack_test_transitions (from_state text NOT NULL, to_state text NOT NULL);
    CREATE FUNCTION skipjack_test_record_transition() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF current_setting('application_name') = ${sql.lit(FIXTURE_APPLICATION)} THEN RETURN NULL; END IF;
      IF TG_OP = 'INSERT' THEN
        INSERT INTO skipjack_test_transitions SELECT '(new)', n.state FROM new_rows n;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO skipjack_test_transitions SELECT o.state, '(deleted)' FROM old_rows o;
      ELSE
        INSERT INTO skipjack_test_transitions SELECT o.state, n.state FROM old_rows o JOIN new_rows n USING (id)
        WHERE o.state IS DISTINCT FROM n.state;
      END IF;
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER jobs_test_inserted AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION skipjack_test_record_transition();
    CREATE TRIGGER jobs_test_updated AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION skipjack_test_record_transition();
    CREATE TRIGGER jobs_test_deleted AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION skipjack_test_record_transition();
  `.execute(db);
}

/** Every distinct state change recorded in this database. */
export async function recordedTransitions<DB>(db: Kysely<DB>): Promise<Transition[]> {
  const { rows } = await sql<Transition>`
    SELECT DISTINCT from_state AS "from", to_state AS "to" FROM skipjack_test_transitions ORDER BY 1, 2`.execute(db);
  return rows;
}

/** Throws, naming them, when the database saw state changes the doc does not list. */
export async function checkTransitions<DB>(db: Kysely<DB>): Promise<void> {
  const listed = new Set(documentedTransitions().map(key));
  const unlisted = (await recordedTransitions(db)).filter((t) => !listed.has(key(t)));
  if (unlisted.length > 0) {
    throw new Error(`state changes that docs/state-machine.md does not list: ${unlisted.map(key).join(', ')}`);
  }
}

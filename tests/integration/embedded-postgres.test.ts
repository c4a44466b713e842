// The embedded PostgreSQL of `npm start`: a second start on the same data directory leaves the
// first one's database alone, and one left running by a run killed outright is taken over.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort } from '../../server/embedded-postgres.js';
import { exited } from '../support/processes.js';

const dataDir = mkdtempSync(join(tmpdir(), 'skipjack-embedded-'));
const owners: ChildProcess[] = [];

afterAll(async () => {
  for (const owner of owners) {
    if (owner.exitCode === null && owner.signalCode === null) {
      owner.kill('SIGKILL');
      await exited(owner);
    }
  }
  // Its PostgreSQL, in a process group of its own, outlives a killed owner: stop it by its pid file.
  try {
    process.kill(Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]), 'SIGINT');
    await new Promise((r) => setTimeout(r, 1000));
  } catch {
    // not running
  }
  rmSync(dataDir, { recursive: true, force: true });
});

/** An owner process on dataDir, and its first line: "ready" or "failed: why". */
async function startOwner(port: number): Promise<{ owner: ChildProcess; line: string }> {
  const owner = spawn(process.execPath, ['--import', 'tsx', 'tests/support/embedded-owner.ts', dataDir, String(port)], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  owners.push(owner);
  const [line] = await once(owner.stdout!, 'data');
  return { owner, line: String(line) };
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query('SELECT 1 AS one')).rows[0].one === 1;
  } finally {
    await client.end();
  }
}

test('a second start on a data directory in use is refused, naming the owner, and the first keeps its database; once the owner is killed outright, its leftover is taken over', async () => {
  const port = await freePort();
  const first = await startOwner(port);
  expect(first.line).toBe('ready\n');
  const firstUrl = `postgres://postgres:skipjack@127.0.0.1:${port}/postgres`;

  const refused = await startOwner(await freePort());
  expect(refused.line).toContain(`belongs to a Skipjack that is still running (pid ${first.owner.pid})`);
  expect(await exited(refused.owner)).toEqual({ code: 1, signal: null });
  expect(await answers(firstUrl)).toBe(true);

  first.owner.kill('SIGKILL');
  await exited(first.owner);
  const secondPort = await freePort();
  const second = await startOwner(secondPort);
  expect(second.line).toBe('ready\n');
  expect(await answers(`postgres://postgres:skipjack@127.0.0.1:${secondPort}/postgres`)).toBe(true);
  await expect(answers(firstUrl)).rejects.toThrow(/ECONNREFUSED/);
});

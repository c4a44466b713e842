// Real worker processes for tests, and checks that nothing a test started outlives it.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { processGroupAlive } from '../../worker/supervisor.js';

const started = new Set<ChildProcess>();

/** The skipjack command (bin/skipjack, what npm links), as an operator runs it. */
export const skipjackCommand = fileURLToPath(new URL('../../bin/skipjack', import.meta.url));

/** `skipjack worker` as its own OS process, exactly as an operator would run it. */
export function spawnWorkerProcess(
  serverUrl: string,
  args: string[] = [],
  output: 'inherit' | 'pipe' = 'inherit',
): ChildProcess {
  const child = spawn(skipjackCommand, ['--server', serverUrl, 'worker', ...args], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    // A worker whose output the test reads logs its warnings; one that only inherits jest's stderr
    // is quiet unless TEST_LOG_LEVEL asks, so that jest's report is not buried in log lines.
    env: { ...process.env, LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? (output === 'pipe' ? 'warn' : 'silent') },
    stdio: ['ignore', output, output],
  });
  started.add(child);
  child.on('exit', () => started.delete(child));
  return child;
}

export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

/** Kills every worker process a test started and is still running (by pid, never by name). */
export async function killStartedProcesses(): Promise<void> {
  await Promise.all(
    [...started].map((child) => {
      child.kill('SIGKILL');
      return exited(child);
    }),
  );
}

/** Kills a job's process group a test knows about, if still alive. */
export function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // already gone
  }
}

export { processGroupAlive };

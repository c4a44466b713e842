// Child processes the bench starts: each in its own process group, tracked by pid, and killed
// by that pid's group only (never by name).
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { once } from 'node:events';

const children = new Set<ChildProcess>();

export function startChild(command: string, args: string[], opts: SpawnOptions = {}): ChildProcess {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'], ...opts, detached: true });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Node running a TypeScript entry through tsx. */
export function startTsChild(
  entry: string,
  args: string[],
  opts: SpawnOptions & { nodeArgs?: string[] } = {},
): ChildProcess {
  return startChild(process.execPath, [...(opts.nodeArgs ?? []), '--import', 'tsx', entry, ...args], opts);
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals) {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    /* already gone */
  }
}

/** SIGTERM the child's group, SIGKILL after graceMs; resolves when it has exited. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  signalGroup(child, 'SIGTERM');
  const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Last-resort cleanup (error paths, process exit): SIGKILL every group still running. */
export function killAllChildren(): void {
  for (const child of children) signalGroup(child, 'SIGKILL');
}

/** Resolves with the first stdout line matching, rejects if the child exits first. */
export function waitForLine(
  child: ChildProcess,
  match: (line: string) => boolean,
  timeoutMs = 30_000,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(
      () => done(new Error(`child ${child.pid}: no ready line within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onData = (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (match(line)) return done(null, line);
      }
    };
    const onExit = (code: number | null, sig: string | null) =>
      done(new Error(`child ${child.pid} exited (${code ?? sig}) before it was ready`));
    const done = (err: Error | null, line?: string) => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve(line!);
    };
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
  });
}

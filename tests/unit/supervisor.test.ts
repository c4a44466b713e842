/**
 * The supervisor against real processes: group kills, kill escalation, leftovers after the main
 * process exits, spawn failures, exit status, env and cwd. Output handling is in
 * supervisor-output.test.ts.
 *
 * Dead processes are judged by /proc, not by kill(-pgid, 0): on a host whose PID 1 does not reap
 * orphans, a killed grandchild stays a zombie in its group forever, and kill(pid, 0) succeeds on it.
 */
import { chmodSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildJobEnv } from '../../worker/job-env.js';
import { superviseProcess, type OutputChunk } from '../../worker/supervisor.js';
import { supervisedProcesses } from '../support/supervised.js';

const escapedPids: number[] = [];
const procs = supervisedProcesses('skipjack-sup-');
const run = procs.run;

afterEach(async () => {
  for (const pid of escapedPids.splice(0)) killQuietly(pid);
});

function text(chunks: OutputChunk[]): string {
  return Buffer.concat(chunks.map((c) => c.data)).toString();
}

async function waitForText(chunks: OutputChunk[], wanted: string): Promise<void> {
  while (!text(chunks).includes(wanted)) await new Promise((r) => setTimeout(r, 10));
}

function procStat(pid: number | string): { state: string; pgid: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: state!, pgid: Number(pgrp) };
  } catch {
    return null;
  }
}

function isLive(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== null && stat.state !== 'Z' && stat.state !== 'X';
}

function liveGroupMembers(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => procStat(pid)?.pgid === pgid && isLive(pid));
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

// Timers may fire a few ms early relative to performance.now(); lower bounds allow for that.
const TIMER_SLACK_MS = 50;

describe('kill escalation', () => {
  test('cancel kills every process in the job group, not only the main one', async () => {
    const { proc, chunks } = run({
      command: ['sh', '-c', 'sleep 1000 & sleep 1000 & echo ready; wait'],
      killGraceSeconds: 0.3,
    });
    await waitForText(chunks, 'ready');
    const pgid = await procs.spawned(proc);
    expect(liveGroupMembers(pgid)).toHaveLength(3);

    proc.cancel();
    const result = await proc.done;

    expect(result).toMatchObject({ reason: 'cancelled', exitCode: null, signal: 'SIGTERM', warnings: [] });
    expect(liveGroupMembers(pgid)).toEqual([]);
  });

  test('timeout sends the stop signal, then SIGKILL to the group after the grace', async () => {
    // An ignored signal stays ignored across exec, so the sleeps ignore TERM too.
    const { proc } = run({
      command: ['sh', '-c', 'trap "" TERM; sleep 1000 & while :; do sleep 0.1; done'],
      timeoutSeconds: 0.5,
      killGraceSeconds: 0.3,
    });
    const pgid = await procs.spawned(proc);
    const result = await proc.done;

    expect(result).toMatchObject({ reason: 'timed_out', exitCode: null, signal: 'SIGKILL', warnings: [] });
    expect(result.durationMs).toBeGreaterThanOrEqual(500 + 300 - TIMER_SLACK_MS);
    expect(liveGroupMembers(pgid)).toEqual([]);
  });

  test('a process that obeys the stop signal ends with it, without waiting for the grace', async () => {
    const { proc } = run({ command: ['sleep', '1000'], timeoutSeconds: 0.2, killGraceSeconds: 30 });
    const result = await proc.done;
    expect(result).toMatchObject({ reason: 'timed_out', exitCode: null, signal: 'SIGTERM' });
  }, 10_000);

  test('killSignal chooses the first signal', async () => {
    const { proc } = run({ command: ['sleep', '1000'], killSignal: 'SIGINT', killGraceSeconds: 30 });
    proc.cancel();
    expect(await proc.done).toMatchObject({ reason: 'cancelled', signal: 'SIGINT' });
  }, 10_000);

  test('stop(shutdown) reports shutdown; the first reason wins', async () => {
    const { proc } = run({ command: ['sleep', '1000'], killGraceSeconds: 0.3 });
    proc.stop('shutdown');
    proc.cancel();
    expect(await proc.done).toMatchObject({ reason: 'shutdown', signal: 'SIGTERM' });
  });

  test('a job that handles the stop signal and exits 0 is still reported as cancelled', async () => {
    const { proc, chunks } = run({
      command: ['sh', '-c', 'trap "exit 0" TERM; echo ready; while :; do sleep 0.1; done'],
      killGraceSeconds: 5,
    });
    await waitForText(chunks, 'ready');
    proc.cancel();
    expect(await proc.done).toMatchObject({ reason: 'cancelled', exitCode: 0, signal: null });
  }, 10_000);

  test('cancel after the process exited changes nothing', async () => {
    const { proc } = run({ command: ['sh', '-c', 'exit 5'] });
    const result = await proc.done;
    proc.cancel();
    proc.cancel();
    expect(result).toMatchObject({ reason: 'exited', exitCode: 5, signal: null });
    expect(await proc.done).toBe(result);
  });
});

describe('leftovers after the main process exits', () => {
  test('done resolves although a grandchild holds stdout, and the grandchild is killed', async () => {
    const { proc, chunks } = run({ command: ['sh', '-c', 'sleep 1000 & echo $!; exit 3'], killGraceSeconds: 0.3 });
    const pgid = await procs.spawned(proc);
    const result = await proc.done;
    const grandchild = Number(text(chunks).trim());

    expect(result).toMatchObject({ reason: 'exited', exitCode: 3, signal: null, warnings: [] });
    expect(grandchild).toBeGreaterThan(0);
    expect(isLive(grandchild)).toBe(false);
    expect(liveGroupMembers(pgid)).toEqual([]);
  }, 10_000);

  test('a leftover that ignores the stop signal is SIGKILLed after the grace', async () => {
    // The main shell exits only once the leftover ignores TERM: else a quick group kill could beat the trap.
    const { proc, chunks } = run({
      command: [
        'sh',
        '-c',
        '(trap "" TERM; touch trapped; exec sleep 1000) & while [ ! -e trapped ]; do sleep 0.01; done; echo $!; exit 0',
      ],
      cwd: procs.scratch(),
      killGraceSeconds: 0.3,
    });
    const result = await proc.done;
    const grandchild = Number(text(chunks).trim());

    expect(result).toMatchObject({ reason: 'exited', exitCode: 0, signal: null, warnings: [] });
    expect(result.durationMs).toBeGreaterThanOrEqual(300 - TIMER_SLACK_MS);
    expect(isLive(grandchild)).toBe(false);
  }, 10_000);

  test('a zombie left in the group does not keep done waiting', async () => {
    // P forks C inside the group, then leaves the group (setsid) and never reaps: C's zombie stays
    // a member of the group until P dies. The main shell exits once C is a zombie.
    const inner = 'sleep 0.05 & echo $! > c.pid; exec setsid sleep 1000 >/dev/null 2>&1';
    const script = [
      `sh -c '${inner}' &`,
      'P=$!; echo $P',
      'while [ ! -s c.pid ] || [ "$(cut -d" " -f5 /proc/$P/stat)" = "$$" ]; do sleep 0.01; done',
      'C=$(cat c.pid)',
      'while [ "$(cut -d" " -f3 /proc/$C/stat)" != Z ]; do sleep 0.01; done',
    ].join('\n');
    const { proc, chunks } = run({ command: ['sh', '-c', script], cwd: procs.scratch(), killGraceSeconds: 0.3 });
    const pgid = await procs.spawned(proc);
    await waitForText(chunks, '\n');
    escapedPids.push(Number(text(chunks).trim())); // before awaiting done, so cleanup has it either way
    const result = await proc.done;
    const zombie = Number(readFileSync(path.join(procs.scratch(), 'c.pid'), 'utf8'));

    expect(procStat(zombie)).toEqual({ state: 'Z', pgid }); // the premise: a zombie is still in the group
    expect(result).toMatchObject({ reason: 'exited', exitCode: 0, warnings: [] });
  }, 20_000);

  test('a process that left the group cannot hold done open through the pipes', async () => {
    // The main shell waits until the child has its own session, so the group kill cannot reach it.
    const script =
      'setsid sleep 1000 & echo $!; while [ "$(cut -d" " -f5 /proc/$!/stat)" = "$$" ]; do sleep 0.01; done';
    const { proc, chunks } = run({ command: ['sh', '-c', script], killGraceSeconds: 0.3, outputDrainSeconds: 0.3 });
    await waitForText(chunks, '\n');
    const escaped = Number(text(chunks).trim());
    escapedPids.push(escaped); // before awaiting done, so cleanup has it either way
    const result = await proc.done;

    expect(result).toMatchObject({ reason: 'exited', exitCode: 0 });
    expect(result.warnings.join('\n')).toMatch(/output pipes still open/);
    expect(isLive(escaped)).toBe(true); // out of a process group's reach, as documented
  }, 10_000);
});

describe('spawn failures', () => {
  test.each([
    ['a command not on PATH', ['skipjack-no-such-command-xyz'], /ENOENT/],
    ['a missing absolute path', ['/nonexistent/skipjack/bin'], /ENOENT/],
    ['an empty command', [], /command is empty/],
  ])('%s resolves spawn_failed', async (_name, command, message) => {
    const { proc } = run({ command });
    const result = await proc.done;
    expect(proc.pid).toBeUndefined();
    expect(result).toMatchObject({ reason: 'spawn_failed', exitCode: null, signal: null, outputBytes: 0 });
    expect(result.error).toMatch(message);
    proc.cancel(); // harmless
  });

  test('a file without execute permission resolves spawn_failed with EACCES', async () => {
    const script = path.join(procs.scratch(), 'not-executable.sh');
    writeFileSync(script, '#!/bin/sh\necho hi\n');
    chmodSync(script, 0o644);
    const result = await run({ command: [script] }).proc.done;
    expect(result.reason).toBe('spawn_failed');
    expect(result.error).toMatch(/EACCES/);
  });

  test('a missing working directory resolves spawn_failed and names the directory', async () => {
    const cwd = path.join(procs.scratch(), 'missing');
    const result = await run({ command: ['true'], cwd }).proc.done;
    expect(result.reason).toBe('spawn_failed');
    expect(result.error).toBe(`working directory ${cwd} does not exist`);
  });

  test('a working directory that is a file resolves spawn_failed', async () => {
    const file = path.join(procs.scratch(), 'file');
    writeFileSync(file, '');
    const result = await run({ command: ['true'], cwd: file }).proc.done;
    expect(result).toMatchObject({ reason: 'spawn_failed', error: `working directory ${file} is not a directory` });
  });

  test('an unknown kill signal is refused before anything runs', async () => {
    const result = await run({ command: ['true'], killSignal: 'SIGNOPE' as NodeJS.Signals }).proc.done;
    expect(result).toMatchObject({ reason: 'spawn_failed', error: 'unknown killSignal SIGNOPE' });
  });
});

describe('exit status, env and cwd', () => {
  test.each([
    ['exit 0', 0, null],
    ['exit 42', 42, null],
    ['kill -USR1 $$', null, 'SIGUSR1'],
  ])('sh -c "%s" reports exitCode %p, signal %p', async (script, exitCode, signal) => {
    const result = await run({ command: ['sh', '-c', script] }).proc.done;
    expect(result).toMatchObject({ reason: 'exited', exitCode, signal });
  });

  test('a job finishing before its timeout is not touched by it', async () => {
    const result = await run({ command: ['sh', '-c', 'exit 0'], timeoutSeconds: 30 }).proc.done;
    expect(result).toMatchObject({ reason: 'exited', exitCode: 0 });
  });

  test('the job gets its env and cwd, and none of the worker env beyond the basics', async () => {
    process.env.SKIPJACK_TEST_WORKER_SECRET = 'hunter2';
    try {
      const script = 'printf "%s|%s|%s|%s" "$FOO" "${SKIPJACK_TEST_WORKER_SECRET-unset}" "$(pwd -P)" "$HOME"';
      const { proc, chunks } = run({
        command: ['sh', '-c', script],
        env: { FOO: 'bar baz', HOME: '/tmp/skipjack-home' },
        cwd: procs.scratch(),
      });
      await proc.done;
      expect(text(chunks)).toBe(`bar baz|unset|${realpathSync(procs.scratch())}|/tmp/skipjack-home`);
    } finally {
      delete process.env.SKIPJACK_TEST_WORKER_SECRET;
    }
  });

  test('buildJobEnv keeps only the inherited basics, and falls back to a standard PATH', () => {
    const parent = { PATH: '/opt/bin', HOME: '/h', LC_ALL: 'C', DATABASE_URL: 'postgres://x', SKIPJACK_TOKEN: 't' };
    expect(buildJobEnv({ JOB: '1' }, parent)).toEqual({ PATH: '/opt/bin', HOME: '/h', LC_ALL: 'C', JOB: '1' });
    expect(buildJobEnv({}, {}).PATH).toMatch(/\/usr\/bin/);
  });

  test('an onOutput that throws is reported, and supervision carries on', async () => {
    const proc = superviseProcess(
      { command: ['sh', '-c', 'echo a; echo b >&2; exit 4'] },
      () => {
        throw new Error('shipper broke');
      },
      procs.launch,
    );
    procs.track(proc);
    const result = await proc.done;
    expect(result).toMatchObject({ reason: 'exited', exitCode: 4, outputBytes: 4 });
    expect(result.warnings).toEqual(['onOutput threw (further errors not reported): shipper broke']);
  });
});

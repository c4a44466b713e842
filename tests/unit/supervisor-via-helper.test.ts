// The supervisor's tests again, with every job process started through the worker's spawn helper
// (worker/spawn-helper.py): its guarantees must not depend on who calls fork(). Then what only
// the helper can get wrong: whose child the job is, a stop before the spawn is confirmed, and the
// helper dying under running jobs.
import { readFileSync } from 'node:fs';
import { SpawnHelper } from '../../worker/spawner.js';
import {
  processGroupAlive,
  superviseProcess,
  type OutputChunk,
  type SupervisedProcess,
} from '../../worker/supervisor.js';

process.env.SKIPJACK_TEST_SPAWN_HELPER = '1';
await import('./supervisor.test.js');
await import('./supervisor-output.test.js');

describe('the spawn helper itself', () => {
  let helper: SpawnHelper;
  const started: SupervisedProcess[] = [];
  beforeEach(() => (helper = new SpawnHelper()));
  afterEach(async () => {
    for (const proc of started.splice(0)) {
      if (proc.pid !== undefined && processGroupAlive(proc.pid)) process.kill(-proc.pid, 'SIGKILL');
      await proc.done;
    }
    helper.stop();
  });
  const run = (command: string[], chunks: OutputChunk[] = []) => {
    const proc = superviseProcess({ command, killGraceSeconds: 0.2 }, (c) => chunks.push(c), helper.launch);
    started.push(proc);
    return proc;
  };
  const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]);

  test('start() answers ready, or why the helper cannot run here (then the worker forks jobs itself)', async () => {
    expect(await helper.start()).toEqual({ ok: true });
    const missing = new SpawnHelper('skipjack-no-such-python');
    expect(await missing.start()).toEqual({ ok: false, reason: expect.stringMatching(/ENOENT/) });
  });

  test("job processes are the helper's children, not the worker's", async () => {
    const chunks: OutputChunk[] = [];
    const proc = run(['sh', '-c', 'echo $PPID'], chunks);
    const result = await proc.done;
    const parent = Number(
      Buffer.concat(chunks.map((c) => c.data))
        .toString()
        .trim(),
    );
    expect(result).toMatchObject({ reason: 'exited', exitCode: 0 });
    expect(parent).not.toBe(process.pid);
    expect(parentOf(parent)).toBe(process.pid); // the helper is ours
  });

  test('its exit report says whether the job left anything in its process group', async () => {
    const exited = (child: ReturnType<typeof helper.launch>) =>
      new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const env = { PATH: process.env.PATH ?? '' };
    const lone = helper.launch('true', [], { env });
    await exited(lone);
    expect(lone.aloneAtExit).toBe(true);
    const parent = helper.launch('sh', ['-c', 'sleep 30 & exit 0'], { env });
    try {
      await exited(parent);
      expect(parent.aloneAtExit).toBe(false);
    } finally {
      process.kill(-parent.pid!, 'SIGKILL'); // the sleep it left behind
    }
    // The supervisor still stops such leftovers itself.
    const result = await run(['sh', '-c', 'sleep 30 & exit 0']).done;
    expect(result).toMatchObject({ reason: 'exited', exitCode: 0 });
    expect(processGroupAlive(started[0].pid!)).toBe(false);
  });

  test('a lone job that obeys the stop signal leaves no SIGKILL timer behind (it would hold the worker up for the grace)', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const proc = superviseProcess({ command: ['sleep', '1000'], killGraceSeconds: 3600 }, () => {}, helper.launch);
    started.push(proc);
    while (proc.pid === undefined) await new Promise((r) => setTimeout(r, 5));
    const before = timers();
    proc.cancel();
    expect(await proc.done).toMatchObject({ reason: 'cancelled', signal: 'SIGTERM' });
    await new Promise((r) => setImmediate(r));
    expect(timers()).toBe(before);
  });

  test('a stop before the helper confirmed the spawn still kills the process', async () => {
    const proc = run(['sleep', '1000']);
    expect(proc.pid).toBeUndefined();
    proc.cancel();
    const result = await proc.done;
    expect(result).toMatchObject({ reason: 'cancelled', signal: 'SIGTERM' });
    expect(processGroupAlive(proc.pid!)).toBe(false);
  });

  test("one job's bad argument or unnamed death signal fails that job only; the helper carries on", async () => {
    const survivor = run(['sleep', '1000']);
    const lone = await run(['echo', 'a\ud800b']).done;
    expect(lone).toMatchObject({ reason: 'spawn_failed', error: expect.stringMatching(/surrogate/) });
    const rt = await run([
      'python3',
      '-c',
      'import os, signal; signal.signal(40, signal.SIG_DFL); os.kill(os.getpid(), 40)',
    ]).done;
    expect(rt).toMatchObject({ reason: 'exited', exitCode: null, signal: 'SIGRTMIN+6' });
    expect(await run(['true']).done).toMatchObject({ reason: 'exited', exitCode: 0 });
    survivor.cancel();
    expect(await survivor.done).toMatchObject({ reason: 'cancelled', warnings: [] });
  });

  test('when the helper dies, running jobs end (their groups killed) with a warning, and the next job gets a new helper', async () => {
    const proc = run(['sh', '-c', 'sleep 1000 & sleep 1000; wait']);
    while (proc.pid === undefined) await new Promise((r) => setTimeout(r, 5));
    process.kill(parentOf(proc.pid), 'SIGKILL');
    const result = await proc.done;
    expect(result.warnings.join('\n')).toMatch(/spawn helper exited/);
    expect(processGroupAlive(proc.pid)).toBe(false);
    const next = await run(['true']).done;
    expect(next).toMatchObject({ reason: 'exited', exitCode: 0 });
  });
});

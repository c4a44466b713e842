// Supervision end to end: a real server and Postgres, real worker agents and real processes.
import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import type { JobView } from '../../protocol/types.js';
import { startServer } from '../../server/main.js';
import { WorkerAgent, type WorkerOptions } from '../../worker/agent.js';
import { SkipjackClient } from '../../protocol/client.js';
import {
  exited,
  killGroup,
  killStartedProcesses,
  processGroupAlive,
  spawnWorkerProcess,
} from '../support/processes.js';
import { quietLog, startTestServer, until, type TestServer } from '../support/server.js';
import { jobFinished } from '../support/server.js';

let t: TestServer;
const agents: WorkerAgent[] = [];
const groups: number[] = [];
beforeAll(async () => {
  t = await startTestServer({ leaseTtlMs: 1500 });
});
afterEach(async () => {
  await Promise.all(agents.splice(0).map((w) => w.shutdown()));
  await killStartedProcesses();
  groups.splice(0).forEach(killGroup);
});
afterAll(async () => {
  await t.close();
});

async function agent(queue: string, extra: Partial<WorkerOptions> = {}) {
  const w = new WorkerAgent({
    serverUrl: t.server.url,
    name: `a-${queue}`,
    queues: [queue],
    pollWaitMs: 1000,
    drainTimeoutMs: 5000,
    log: quietLog,
    ...extra,
  });
  await w.start();
  agents.push(w);
  return w;
}

const finished = (id: number, timeoutMs?: number) => jobFinished(t.client, id, timeoutMs);

/** The job prints its shell's pid first: with setsid that is also its process group id. */
async function groupOf(jobId: number): Promise<number> {
  const out = await until('the job to print its pid', async () => (await t.client.logs(jobId)).match(/^(\d+)\n/)?.[1]);
  groups.push(Number(out));
  return Number(out);
}

const attempts = (id: number) =>
  t.client
    .request<{ attempts: { outcome: string; endReason: string; exitCode: number | null }[] }>(
      'GET',
      `/jobs/${id}/attempts`,
    )
    .then((r) => r.attempts);

test('cancel kills the whole process group: no background child survives', async () => {
  await agent('group');
  const job = await t.client.enqueue({
    command: ['sh', '-c', 'echo $$; sleep 1000 & sleep 1000 & wait'],
    queue: 'group',
    killGraceSeconds: 2,
  });
  const pgid = await groupOf(job.id);
  expect(processGroupAlive(pgid)).toBe(true);
  await t.client.cancel(job.id);
  expect(await finished(job.id)).toMatchObject({ state: 'cancelled', endReason: 'cancelled' });
  expect(processGroupAlive(pgid)).toBe(false);
});

test('a cancel reaches the worker at once, not at its next heartbeat; so does a drain', async () => {
  // A lease of 2 hours: heartbeats 40 minutes apart, each asking to be held longer than the
  // server holds any. Only a held heartbeat answered early is in time.
  const slow = await startServer({ ...t.config, port: 0, leaseTtlMs: 7_200_000 }, quietLog);
  const w = new WorkerAgent({
    serverUrl: slow.url,
    name: 'held-heartbeat',
    queues: ['held'],
    pollWaitMs: 1000,
    drainTimeoutMs: 5000,
    log: quietLog,
  });
  try {
    await w.start();
    const client = new SkipjackClient({ baseUrl: slow.url });
    const job = await client.enqueue({ command: ['sleep', '1000'], queue: 'held', killGraceSeconds: 1 });
    await until('running', async () => (await client.getJob(job.id)).state === 'running');
    await new Promise((r) => setTimeout(r, 300)); // the first heartbeat is held by now
    await client.cancel(job.id);
    expect(await jobFinished(client, job.id, 5000)).toMatchObject({ state: 'cancelled', endReason: 'cancelled' });
    await new Promise((r) => setTimeout(r, 300));
    await client.request('POST', `/workers/${w.workerId}/drain`);
    await until(
      'the worker to stop',
      async () => !(await client.workers()).workers.some((x) => x.name === 'held-heartbeat'),
      5000,
    );
  } finally {
    await w.shutdown();
    await slow.close();
  }
});

test('a timeout escalates from TERM to KILL against a program that ignores TERM', async () => {
  await agent('term');
  const started = Date.now();
  const job = await t.client.enqueue({
    command: ['sh', '-c', 'echo $$; trap "" TERM; while :; do sleep 0.05; done'],
    queue: 'term',
    timeoutSeconds: 0.5,
    killGraceSeconds: 0.5,
    maxAttempts: 1,
  });
  const pgid = await groupOf(job.id);
  const done = await finished(job.id);
  expect(done).toMatchObject({ state: 'failed', endReason: 'timed_out', signal: 'SIGKILL' });
  // SIGKILL only after the grace: 0.5 s of run time plus 0.5 s of grace.
  expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  expect(processGroupAlive(pgid)).toBe(false);
});

test('restart policy on-failure: restarts until the program succeeds; each run is recorded', async () => {
  await agent('restart');
  const counter = `/tmp/skipjack-restart-${process.pid}-${Date.now()}`;
  const job = await t.client.enqueue({
    command: [
      'sh',
      '-c',
      `n=$(cat ${counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > ${counter}; echo run $n; [ $n -ge 3 ]`,
    ],
    queue: 'restart',
    restart: { policy: 'on-failure', maxRestarts: 5, windowSeconds: 60, delaySeconds: 0.05, backoff: 1 },
  });
  expect(await finished(job.id)).toMatchObject({ state: 'succeeded', attempts: 1 });
  expect((await attempts(job.id)).map((a) => [a.outcome, a.exitCode])).toEqual([
    ['restarted', 1],
    ['restarted', 1],
    ['succeeded', 0],
  ]);
  expect(await t.client.logs(job.id)).toBe('--- run 1 ---\nrun 1\n--- run 2 ---\nrun 2\n--- run 3 ---\nrun 3\n');
});

test('a cancel while a restart waits out its delay ends the job at once, not after the delay', async () => {
  await agent('restart-wait');
  const job = await t.client.enqueue({
    command: ['sh', '-c', 'echo ran; exit 3'],
    queue: 'restart-wait',
    restart: { policy: 'always', maxRestarts: 5, windowSeconds: 600, delaySeconds: 60, backoff: 1 },
  });
  await until('the first run to print', async () => (await t.client.logs(job.id)).includes('ran'));
  // Its process has exited by now; the worker waits out the restart's delay.
  await new Promise((r) => setTimeout(r, 300));
  const asked = Date.now();
  await t.client.cancel(job.id);
  expect(await finished(job.id, 15_000)).toMatchObject({ state: 'cancelled' });
  expect(Date.now() - asked).toBeLessThan(15_000);
  expect((await attempts(job.id)).map((a) => a.outcome)).toEqual(['cancelled']);
});

test('a crash loop is detected and reported, not spun forever', async () => {
  await agent('crash');
  const job = await t.client.enqueue({
    command: ['sh', '-c', 'echo crashing; exit 9'],
    queue: 'crash',
    maxAttempts: 1,
    restart: { policy: 'always', maxRestarts: 3, windowSeconds: 60, delaySeconds: 0.02, backoff: 2 },
  });
  const done = await finished(job.id);
  expect(done).toMatchObject({ state: 'failed', endReason: 'crash_loop', exitCode: 9 });
  expect(done.error).toBe('crash loop: 3 restarts within 60s; last run exited with code 9');
  expect((await attempts(job.id)).map((a) => a.outcome)).toEqual(['restarted', 'restarted', 'restarted', 'failed']);
});

test('the allowlist refuses a program outside it, with the reason', async () => {
  await agent('allow', { allow: ['/usr/bin/true', '/bin/true'] });
  const ok = await t.client.enqueue({ command: ['true'], queue: 'allow' });
  const refused = await t.client.enqueue({
    command: ['sh', '-c', 'echo should not run'],
    queue: 'allow',
    maxAttempts: 1,
  });
  expect((await finished(ok.id)).state).toBe('succeeded');
  const done = await finished(refused.id);
  expect(done).toMatchObject({ state: 'failed', endReason: 'refused' });
  expect(done.error).toMatch(
    /^refused: executable \/\S*sh .*is not in the worker's allowlist \(\/usr\/bin\/true, \/bin\/true\)$/,
  );
  expect(await t.client.logs(refused.id)).toBe('');
});

describe('a worker process', () => {
  test('is the process its supervisor started (bin/skipjack execs node), with the heap setting it runs on', async () => {
    const child = spawnWorkerProcess(t.server.url, ['--name', 'launched', '--queue', 'launched']);
    await until('registered', async () => (await t.client.workers()).workers.some((w) => w.name === 'launched'));
    // Signals sent to this pid (systemd's, a terminal's) reach the worker itself: no wrapper between.
    const argv = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
    expect(argv.slice(1, 3)).toEqual(['--initial-old-space-size=64', expect.stringMatching(/\/bin\/skipjack\.js$/)]);
    child.kill('SIGTERM');
    expect(await exited(child)).toEqual({ code: 0, signal: null });
    expect((await t.client.workers()).workers.map((w) => w.name)).not.toContain('launched');
  });

  test('a SIGTERM while it waits to register (no server) stops it at once, with code 0', async () => {
    const child = spawnWorkerProcess('http://127.0.0.1:1', ['--name', 'never-registered'], 'pipe');
    let log = '';
    child.stdout!.on('data', (d) => (log += d));
    child.stderr!.on('data', (d) => (log += d));
    await until('a registration retried', async () => log.includes('retrying registration'));
    child.kill('SIGTERM');
    expect(await exited(child)).toEqual({ code: 0, signal: null });
  });

  test('first SIGTERM drains: running work finishes, nothing new is claimed, the worker deregisters', async () => {
    const child = spawnWorkerProcess(t.server.url, ['--name', 'drain1', '--queue', 'drain1', '--drain-timeout', '30s']);
    const job = await t.client.enqueue({ command: ['sh', '-c', 'sleep 1; echo finished'], queue: 'drain1' });
    await until('running', async () => (await t.client.getJob(job.id)).state === 'running');
    // One Ctrl-C often arrives twice (the terminal's group signal, and npm passing it on): still a drain.
    child.kill('SIGTERM');
    child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    const later = await t.client.enqueue({ command: ['true'], queue: 'drain1' });
    expect(await exited(child)).toEqual({ code: 0, signal: null });
    expect(await t.client.getJob(job.id)).toMatchObject({ state: 'succeeded', attempts: 1 });
    expect(await t.client.logs(job.id)).toBe('finished\n');
    expect(await t.client.getJob(later.id)).toMatchObject({ state: 'pending', attempts: 0 });
    expect((await t.client.workers()).workers.map((w) => w.name)).not.toContain('drain1');
  });

  test('a second SIGTERM stops running jobs with kill escalation and requeues them uncharged', async () => {
    const child = spawnWorkerProcess(t.server.url, ['--name', 'drain2', '--queue', 'drain2', '--drain-timeout', '60s']);
    const job = await t.client.enqueue({
      command: ['sh', '-c', 'echo $$; exec sleep 1000'],
      queue: 'drain2',
      killGraceSeconds: 1,
    });
    const pgid = await groupOf(job.id);
    child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 1500));
    child.kill('SIGTERM');
    expect(await exited(child)).toEqual({ code: 0, signal: null });
    const after = await t.client.getJob(job.id);
    expect(after).toMatchObject({ state: 'pending', attempts: 0 });
    expect(processGroupAlive(pgid)).toBe(false);
    expect((await attempts(job.id)).map((a) => a.outcome)).toEqual(['requeue']);
    await t.client.cancel(job.id);
  });

  test('a third SIGTERM, with the server away, stops waiting for it: the worker exits, its job stopped and its outcome dropped', async () => {
    // A server of its own, with a lease far longer than this test: the worker would wait for it.
    const away = await startServer({ ...t.config, port: 0, leaseTtlMs: 120_000 }, quietLog);
    const child = spawnWorkerProcess(away.url, ['--name', 'give-up', '--queue', 'give-up', '--drain-timeout', '60s']);
    const job = await t.client.enqueue({
      command: ['sh', '-c', 'echo $$; exec sleep 1000'],
      queue: 'give-up',
      killGraceSeconds: 1,
    });
    const pgid = await groupOf(job.id);
    await away.close();
    const pause = () => new Promise((r) => setTimeout(r, 1200)); // more than one Ctrl-C's echo apart
    child.kill('SIGTERM');
    await pause();
    child.kill('SIGTERM'); // the job stops; its outcome cannot reach the server
    await until('the job stopped', async () => !processGroupAlive(pgid), 5000);
    await pause();
    child.kill('SIGTERM');
    const gaveUp = await Promise.race([
      exited(child),
      new Promise((r) => setTimeout(() => r('still waiting'), 15_000)),
    ]);
    expect(gaveUp).toEqual({ code: 0, signal: null });
    // Its outcome never reached the database: the lease, when it expires, gives the job out again.
    expect((await t.client.getJob(job.id)).state).toBe('running');
    await t.client.cancel(job.id);
  });

  test("killed with kill -9 while a finished job's leftover processes are being stopped, those are stopped too", async () => {
    const child = spawnWorkerProcess(t.server.url, ['--name', 'doomed-leftovers', '--queue', 'doomed-leftovers']);
    // The main process exits at once and leaves a member that ignores SIGTERM: the worker is
    // inside the job's 2 s grace when it dies, and only the spawn helper is left to finish it.
    const job = await t.client.enqueue({
      command: ['sh', '-c', 'trap "" TERM; echo $$; sleep 1000 & exit 0'],
      queue: 'doomed-leftovers',
      killGraceSeconds: 2,
    });
    const pgid = await groupOf(job.id);
    child.kill('SIGKILL');
    await exited(child);
    await until('the leftover processes to be stopped', async () => !processGroupAlive(pgid), 8000);
  });

  test('killed with kill -9, its jobs return to pending within the lease TTL plus a reaper tick, and their processes are stopped', async () => {
    const child = spawnWorkerProcess(t.server.url, ['--name', 'doomed', '--queue', 'doomed']);
    // It ignores SIGTERM, so only the escalation to SIGKILL after its grace stops it.
    const job = await t.client.enqueue({
      command: ['sh', '-c', 'trap "" TERM; echo $$; exec sleep 1000'],
      queue: 'doomed',
      killGraceSeconds: 1,
    });
    const pgid = await groupOf(job.id);
    const running = await t.client.getJob(job.id);
    child.kill('SIGKILL');
    await exited(child);
    // The spawn helper sees the worker gone and stops the job, or it would run on beside its rerun.
    await until('the orphaned job to be stopped', async () => !processGroupAlive(pgid), 5000);
    const back: JobView = await until('back to pending', async () => {
      const j = await t.client.getJob(job.id);
      return j.state === 'pending' ? j : undefined;
    });
    const elapsed = Date.now() - Date.parse(running.leaseExpiresAt!);
    // Pending no later than one reaper interval (200 ms here) after the lease expired, plus slack for a busy machine.
    expect(elapsed).toBeLessThan(t.config.reaperIntervalMs + 2000);
    expect(back).toMatchObject({ endReason: 'lost', attempts: 1 });
    expect((await attempts(job.id)).map((a) => a.outcome)).toEqual(['lost']);
    await t.client.cancel(job.id);
    const n = (
      await sql<{
        n: number;
      }>`SELECT count(*)::int AS n FROM jobs WHERE id = ${job.id} AND state = 'cancelled'`.execute(t.tdb.db)
    ).rows[0].n;
    expect(n).toBe(1);
  });
});

// The command line as a user runs it, against a real server.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startTestServer, type TestServer } from '../support/server.js';
import { WorkerAgent } from '../../worker/agent.js';
import { startServer } from '../../server/main.js';
import { quietLog } from '../support/server.js';
import { skipjackCommand } from '../support/processes.js';

let t: TestServer;
let worker: WorkerAgent;
beforeAll(async () => {
  t = await startTestServer();
  worker = new WorkerAgent({
    serverUrl: t.server.url,
    name: 'cli-worker',
    region: 'mad',
    pollWaitMs: 1000,
    drainTimeoutMs: 2000,
    log: quietLog,
  });
  await worker.start();
});
afterAll(async () => {
  await worker.shutdown();
  await t.close();
});

const skipjack = (...args: string[]) => skipjackAt(t.server.url, ...args);

function skipjackAt(url: string, ...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(skipjackCommand, ['--server', url, ...args], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

test("enqueue --wait streams the output and exits with the job's exit code", async () => {
  const r = await skipjack('enqueue', '--wait', '--max-attempts', '1', '--', 'sh', '-c', 'echo hello; exit 3');
  expect(r.stdout).toBe('hello\n');
  expect(r.code).toBe(3);
  expect(r.stderr).toMatch(/job \d+ failed \(exit code 3\)/);
});

test('status, logs and cancel', async () => {
  const enq = await skipjack('enqueue', '--', 'sh', '-c', 'echo started; exec sleep 30');
  const id = enq.stdout.trim();
  expect(id).toMatch(/^\d+$/);
  await new Promise((r) => setTimeout(r, 1500));
  expect((await skipjack('logs', id)).stdout).toBe('started\n');
  expect(JSON.parse((await skipjack('status', id)).stdout)).toMatchObject({ id: Number(id), state: 'running' });
  expect(await skipjack('cancel', id)).toMatchObject({
    code: 0,
    stdout: expect.stringMatching(/cancel requested/),
    stderr: '',
  });
});

test('--wait-placement fails with the reasons when nothing can place the job in time', async () => {
  const r = await skipjack('enqueue', '--region', 'ord', '--allow-unplaceable', '--wait-placement', '1s', '--', 'true');
  expect(r.code).toBe(3);
  expect(r.stderr).toMatch(/was not placed: unplaceable: not placed within 1s; 0\/1 workers fit: 1 region mad≠ord/);
});

test('jobs lists jobs newest first, by queue and state, a page at a time', async () => {
  const ids: number[] = [];
  for (const word of ['one', 'two', "it's three"])
    ids.push(Number((await skipjack('enqueue', '--queue', 'listed', '--', 'echo', word)).stdout.trim()));
  const page = await skipjack('jobs', '--queue', 'listed', '--limit', '2');
  expect(page.code).toBe(0);
  const lines = page.stdout.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^ID +STATE +QUEUE +ATTEMPTS +ENQUEUED +COMMAND$/);
  expect(lines.slice(1).map((l) => Number(l.split(' ')[0]))).toEqual([ids[2], ids[1]]);
  // Quoted as a shell would need it, so that it can be pasted.
  expect(lines[1]).toMatch(/ pending +listed +0\/3 +\d+s ago +echo 'it'\\''s three'$/);
  expect(page.stderr).toBe(`more: skipjack jobs --before ${ids[1]}\n`);
  const rest = await skipjack('jobs', '--queue', 'listed', '--before', String(ids[1]), '--json');
  expect(JSON.parse(rest.stdout)).toMatchObject({ jobs: [{ id: ids[0], command: ['echo', 'one'] }], nextCursor: null });
  expect(await skipjack('jobs', '--queue', 'listed', '--state', 'running')).toMatchObject({
    code: 0,
    stdout: '',
    stderr: 'no jobs\n',
  });
  const bad = await skipjack('jobs', '--state', 'sleeping');
  expect([bad.code, bad.stderr]).toEqual([
    1,
    expect.stringMatching(/'sleeping' is invalid. Allowed choices are pending, assigned, running/),
  ]);
});

test("workers lists live workers; why shows each one's verdict on a job, and the reason a worker cannot run it", async () => {
  const id = (await skipjack('enqueue', '--region', 'ord', '--allow-unplaceable', '--', 'true')).stdout.trim();
  const why = await skipjack('why', id);
  expect(why.code).toBe(0);
  const [summary, header, row] = why.stdout.trimEnd().split('\n');
  expect(summary).toBe(`job ${id} (pending, pull placement): 0/1 workers fit: 1 region mad≠ord`);
  expect(header).toMatch(/^WORKER +ID +FITS +WHY$/);
  expect(row).toMatch(new RegExp(`^cli-worker +${worker.workerId} +no +region mad≠ord$`));
  const workers = await skipjack('workers');
  expect(workers.stdout.split('\n')[0]).toMatch(
    /^NAME +ID +STATE +REGION +SLOTS +CPU \(m\) +MEMORY \(MB\) +QUEUES +LAST SEEN$/,
  );
  expect(workers.stdout).toMatch(
    new RegExp(`\ncli-worker +${worker.workerId} +active +mad +\\d+/4 +\\d+/1000 +\\d+/1024 +default +\\d+s ago\n`),
  );
  expect(JSON.parse((await skipjack('workers', '--json')).stdout)).toEqual(
    expect.arrayContaining([expect.objectContaining({ id: worker.workerId, region: 'mad' })]),
  );
  expect(JSON.parse((await skipjack('placement', id, '--json')).stdout)).toMatchObject({
    jobId: Number(id),
    bestWorkerId: null,
    verdicts: [{ workerId: worker.workerId, fits: false }],
  });
  expect(await skipjack('why', '999999999')).toMatchObject({
    code: 2,
    stderr: expect.stringMatching(/job 999999999 not found/),
  });
});

test('bad input names the field; an unknown command shows help', async () => {
  const r = await skipjack('enqueue', '--region', 'ord', '--', 'true');
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(
    /no known worker could ever run this job: 0\/1 workers fit: 1 region mad≠ord\n\(--allow-unplaceable enqueues it anyway/,
  );
  // The server names the body's field; the CLI says which flag set it.
  const zero = await skipjack('enqueue', '--timeout', '0', '--', 'true');
  expect([zero.code, zero.stderr]).toEqual([
    2,
    expect.stringMatching(/body\.timeoutSeconds: .*\n\(set by --timeout\)/),
  ]);
  const bad = await skipjack('frobnicate');
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toMatch(/unknown command 'frobnicate'/);
});

test('logs -f of a job that fails ends with its exit code, and says how the job ended', async () => {
  const job = await t.client.enqueue({ command: ['sh', '-c', 'echo oops; exit 7'], maxAttempts: 1 });
  const r = await skipjack('logs', '-f', String(job.id));
  expect(r.stdout).toBe('oops\n');
  expect(r.stderr).toContain(`job ${job.id} failed (exit code 7)`);
  expect(r.code).toBe(7);
});

test('logs -f rides out a server restart and prints every byte once', async () => {
  const first = await startServer({ ...t.config, port: 0 }, quietLog);
  const job = await t.client.enqueue({
    command: ['sh', '-c', 'for i in $(seq 1 14); do echo line $i; sleep 0.3; done'],
  });
  const follow = skipjackAt(first.url, 'logs', '-f', String(job.id));
  await new Promise((r) => setTimeout(r, 2000)); // the CLI starts in about a second, then follows
  await first.close();
  const closedAt = Date.now();
  await new Promise((r) => setTimeout(r, 300));
  const second = await startServer({ ...t.config, port: first.port }, quietLog);
  try {
    const r = await follow;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(Array.from({ length: 14 }, (_, i) => `line ${i + 1}\n`).join(''));
    // The follow was cut mid-job: the job was still running when the first server went away.
    expect(Date.parse((await t.client.getJob(job.id)).finishedAt!)).toBeGreaterThan(closedAt);
  } finally {
    await second.close();
  }
});

test('deregister takes a worker out for good; an unknown one is an error that says so', async () => {
  const w = await t.client.register({ name: 'to-deregister', queues: ['none'] });
  expect(await skipjack('deregister', w.id)).toMatchObject({
    code: 0,
    stdout: `worker ${w.id} deregistered; its running jobs were taken back\n`,
  });
  expect((await t.client.request<{ state: string }>('GET', `/workers/${w.id}`)).state).toBe('deregistered');
  const unknown = await skipjack('deregister', '00000000-0000-4000-8000-000000000000');
  expect(unknown.code).not.toBe(0);
  expect(unknown.stderr).toMatch(/not found/);
});

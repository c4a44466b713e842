// A worker paused with SIGSTOP cannot stop its jobs, and its leases run out while it sleeps: the
// spawn helper, which is not paused, kills them before the server can give them to another
// worker. Seen from outside: each copy of the job appends its pid and the time every 100 ms,
// and the lines of the two copies must not interleave.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killGroup, killStartedProcesses, spawnWorkerProcess } from '../support/processes.js';
import { startTestServer, until, type TestServer } from '../support/server.js';

let t: TestServer;
const dir = mkdtempSync(join(tmpdir(), 'skipjack-paused-'));
beforeAll(async () => {
  t = await startTestServer({ leaseTtlMs: 3000 });
});
afterAll(async () => {
  await killStartedProcesses();
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ').map(Number) as [number, number]);

test("a SIGSTOPped worker's job is dead before its lease can be taken back: no two copies at once", async () => {
  const file = join(dir, 'ticks');
  const job = await t.client.enqueue({
    command: ['sh', '-c', `while :; do echo "$$ $(date +%s%3N)" >> ${file}; sleep 0.1; done`],
    queue: 'paused',
    timeoutSeconds: 60,
  });
  const first = spawnWorkerProcess(t.server.url, ['--queue', 'paused', '--name', 'to-pause']);
  await until('the first copy running', async () => {
    try {
      return lines(file).length > 3;
    } catch {
      return false;
    }
  });
  const [firstPid] = lines(file)[0];
  first.kill('SIGSTOP');
  try {
    spawnWorkerProcess(t.server.url, ['--queue', 'paused', '--name', 'takes-over']);
    await until('a second copy', async () => lines(file).some(([pid]) => pid !== firstPid), 20_000);
    await new Promise((r) => setTimeout(r, 1000));
  } finally {
    first.kill('SIGCONT');
  }
  const all = lines(file);
  const lastOfFirst = Math.max(...all.filter(([pid]) => pid === firstPid).map(([, at]) => at));
  const firstOfSecond = Math.min(...all.filter(([pid]) => pid !== firstPid).map(([, at]) => at));
  expect(lastOfFirst).toBeLessThan(firstOfSecond);
  for (const [pid] of all) killGroup(pid);
  await t.client.cancel(job.id).catch(() => undefined);
}, 60_000);

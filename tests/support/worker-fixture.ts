// The worker test files' shared setup: one server, the workers a test starts (shut down after
// each test), and cleanups for the end of the file.
import { WorkerAgent } from '../../worker/agent.js';
import { jobFinished, quietLog, startTestServer, type TestServer } from './server.js';

export interface WorkerFixture {
  t: TestServer;
  workers: WorkerAgent[];
  cleanups: (() => void)[];
}

type WorkerOptions = ConstructorParameters<typeof WorkerAgent>[0];

// Short leases keep cancels quick (heartbeats every third of it), but not so short that a starved
// CI machine lets a finished run's lease expire before its release lands (seen once at 1.5 s).
export function useWorkerFixture(leaseTtlMs = 3000): WorkerFixture {
  const fx = { workers: [], cleanups: [] } as unknown as WorkerFixture;
  beforeAll(async () => {
    fx.t = await startTestServer({ leaseTtlMs });
  });
  afterEach(async () => {
    await Promise.all(fx.workers.splice(0).map((w) => w.shutdown()));
  });
  afterAll(async () => {
    await fx.t.close();
    fx.cleanups.forEach((clean) => clean());
  });
  return fx;
}

export async function startFixtureWorker(
  fx: WorkerFixture,
  queue: string,
  serverUrl = fx.t.server.url,
  extra: Partial<WorkerOptions> = {},
) {
  const w = new WorkerAgent({
    serverUrl,
    name: `w-${queue}`,
    queues: [queue],
    pollWaitMs: 2000,
    drainTimeoutMs: 5000,
    log: quietLog,
    ...extra,
  });
  await w.start();
  fx.workers.push(w);
  return w;
}

export const finishedOn = (fx: WorkerFixture) => (id: number, timeoutMs?: number) =>
  jobFinished(fx.t.client, id, timeoutMs);

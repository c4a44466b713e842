// A real Skipjack worker process with the 'noop' executor (the CLI has no flag for it), for
// benchmarks of the queue path over HTTP. Prints "ready <workerId>" once registered.
//   node --import tsx bench/worker-process.ts --server URL [--slots N] [--region R] [--claim-gather-ms MS] [--record-starts]
// With --record-starts it prints "start <jobId> <wall ms>" as each claim answer arrives, which is
// when the noop executor starts the job (startJob runs synchronously on the answer).
import pino from 'pino';
import { onStopSignals } from '../cli/signals.js';
import { WorkerAgent } from '../worker/agent.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const log = pino({ level: process.env.LOG_LEVEL ?? 'warn' }, pino.destination(2));
const serverUrl = arg('server') ?? 'http://127.0.0.1:7070';
const slots = Number(arg('slots') ?? 100);
const agent = new WorkerAgent({
  serverUrl,
  name: `bench-noop-${process.pid}`,
  region: arg('region'),
  capacity: { slots, cpu: 10_000_000, memoryMb: 100_000_000, diskMb: 1_000_000_000 },
  executor: 'noop',
  pollWaitMs: Number(arg('poll-wait-ms') ?? 30_000),
  claimGatherMs: arg('claim-gather-ms') === undefined ? undefined : Number(arg('claim-gather-ms')),
  drainTimeoutMs: 5_000,
  log,
});

if (process.argv.includes('--record-starts')) {
  const client = agent.client;
  const claim = client.claim.bind(client);
  client.claim = async (...args: Parameters<typeof claim>) => {
    const answer = await claim(...args);
    if (answer.jobs.length > 0) {
      const t = performance.timeOrigin + performance.now();
      process.stdout.write(answer.jobs.map((j) => `start ${j.id} ${t.toFixed(3)}\n`).join(''));
    }
    return answer;
  };
}

await agent.start();
process.stdout.write(`ready ${agent.workerId}\n`);
await onStopSignals(
  log,
  () => agent.shutdown(),
  () => agent.stopAll(),
);
process.exit(0);

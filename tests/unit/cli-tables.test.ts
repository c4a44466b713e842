// The CLI's listings: aligned columns, commands quoted to paste, the best worker marked.
import { jobTable, placementTable } from '../../cli/tables.js';
import type { JobView } from '../../protocol/types.js';

const job = (id: number, command: string[], createdAt: string): JobView => ({
  id,
  queue: 'default',
  state: 'pending',
  command,
  env: {},
  cwd: null,
  priority: 0,
  attempts: 0,
  maxAttempts: 3,
  runAt: createdAt,
  createdAt,
  startedAt: null,
  finishedAt: null,
  timeoutSeconds: null,
  exitCode: null,
  signal: null,
  endReason: null,
  error: null,
  workerId: null,
  leaseExpiresAt: null,
  cancelRequested: false,
  idempotencyKey: null,
  constraints: null,
  waitingReason: null,
});

test('a job table aligns its columns, says how long ago each was enqueued, and cuts a long command', () => {
  const now = Date.parse('2026-12-04T12:00:00Z');
  const out = jobTable(
    [job(12, ['sh', '-c', 'echo "$HOME"'], '2026-12-04T11:59:30Z'), job(9, ['x'.repeat(80)], '2026-12-02T12:00:00Z')],
    now,
  );
  expect(out).toBe(
    [
      'ID  STATE    QUEUE    ATTEMPTS  ENQUEUED  COMMAND',
      `12  pending  default  0/3       30s ago   sh -c 'echo "$HOME"'`,
      `9   pending  default  0/3       2d ago    ${'x'.repeat(59)}…`,
      '',
    ].join('\n'),
  );
});

test("a placement table marks the worker ranked first and gives a refusing worker's filter and reason", () => {
  const out = placementTable({
    jobId: 5,
    state: 'pending',
    mode: 'central',
    summary: '1/2 workers fit',
    bestWorkerId: 'w-1',
    verdicts: [
      { workerId: 'w-1', workerName: 'mad-1', fits: true, scores: { spread: 80 }, total: 79.6 },
      { workerId: 'w-2', workerName: 'ord-1', fits: false, filter: 'region', reason: 'region ord≠mad' },
      { workerId: 'w-3', workerName: 'gpu-1', fits: false, filter: 'gpu-quota', reason: 'quota spent' },
    ],
  });
  expect(out).toBe(
    [
      'job 5 (pending, central placement): 1/2 workers fit',
      'WORKER   ID   FITS  WHY',
      'mad-1 *  w-1  yes   score 80',
      'ord-1    w-2  no    region ord≠mad',
      'gpu-1    w-3  no    gpu-quota: quota spent',
      '* the worker ranked first',
      '',
    ].join('\n'),
  );
});

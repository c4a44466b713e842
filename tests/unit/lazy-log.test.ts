// A job's logger costs nothing until it logs at a level that is on, and then logs with the job's bindings.
import pino from 'pino';
import { Writable } from 'node:stream';
import { lazyChild } from '../../worker/lazy-log.js';

function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const out = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  return { log: pino({ level }, out), lines };
}

test('below the level nothing is made or written; at it, the line carries the bindings', async () => {
  const { log, lines } = capture('warn');
  let made = 0;
  const child = log.child.bind(log);
  log.child = ((...args: Parameters<typeof child>) => (made++, child(...args))) as typeof log.child;
  const jobLog = lazyChild(log, { jobId: 7, attempt: 2 });
  jobLog.info({ command: 'true' }, 'job started');
  jobLog.debug('detail');
  expect(made).toBe(0);
  jobLog.warn({ err: 'x' }, 'release refused');
  jobLog.error('failed');
  expect(made).toBe(1);
  await new Promise((r) => setImmediate(r));
  expect(lines.map((l) => [l.msg, l.jobId, l.attempt])).toEqual([
    ['release refused', 7, 2],
    ['failed', 7, 2],
  ]);
});

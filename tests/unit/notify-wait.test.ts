// The notify hub's waits: woken by a NOTIFY, or ended by any of the signals they are given.
import { getEventListeners } from 'node:events';
import pino from 'pino';
import { NotifyHub } from '../../server/long-poll/notify-hub.js';

// Waits never touch the database: the hub is not started.
const newHub = () => new NotifyHub('postgres://127.0.0.1:1/unused', pino({ level: 'silent' }));

test('a wait for jobs ends, false, when any one of its signals aborts, and leaves no listener on the others', async () => {
  const hub = newHub();
  const hangUp = new AbortController();
  const taken = new AbortController();
  const waiting = hub.waitForJobs(hub.jobsSeq, 60_000, [hangUp.signal, taken.signal]);
  taken.abort('taken');
  await expect(waiting).resolves.toBe(false);
  expect(getEventListeners(hangUp.signal, 'abort')).toHaveLength(0);
});

test('a wait given a signal that has already aborted ends at once', async () => {
  const hub = newHub();
  const gone = new AbortController();
  gone.abort('gone');
  const started = Date.now();
  await expect(hub.waitForJobs(hub.jobsSeq, 60_000, [new AbortController().signal, gone.signal])).resolves.toBe(false);
  expect(Date.now() - started).toBeLessThan(1000);
});

test('a job wake-up ends a wait, true, and unhooks its signal', async () => {
  const hub = newHub();
  const hangUp = new AbortController();
  const waiting = hub.waitForJobs(hub.jobsSeq, 60_000, [hangUp.signal]);
  hub.wakeJobs();
  await expect(waiting).resolves.toBe(true);
  expect(getEventListeners(hangUp.signal, 'abort')).toHaveLength(0);
});

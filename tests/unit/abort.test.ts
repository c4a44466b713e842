import { jest } from '@jest/globals';
import { getEventListeners } from 'node:events';
import { eitherAborts } from '../../worker/abort.js';
import { sleep } from '../../worker/backoff.js';

test('eitherAborts aborts with either signal, and disposed leaves nothing hooked on the lasting one', () => {
  const lasting = new AbortController();
  for (let i = 0; i < 1000; i++) {
    const brief = new AbortController();
    const either = eitherAborts(lasting.signal, brief.signal);
    if (i === 0) {
      brief.abort('room');
      expect([either.signal.aborted, either.signal.reason]).toEqual([true, 'room']);
    }
    either.dispose();
  }
  expect(getEventListeners(lasting.signal, 'abort')).toHaveLength(0);
  const brief = new AbortController();
  const either = eitherAborts(lasting.signal, brief.signal);
  lasting.abort('stop');
  expect([either.signal.aborted, either.signal.reason]).toEqual([true, 'stop']);
  expect(eitherAborts(lasting.signal, new AbortController().signal).signal.aborted).toBe(true);
});

test('sleep with a signal aborted already returns without its timer', async () => {
  // No timer ever fires here: a sleep that waited for its own would never return.
  jest.useFakeTimers();
  try {
    await expect(sleep(5_000, AbortSignal.abort())).resolves.toBeUndefined();
  } finally {
    jest.useRealTimers();
  }
});

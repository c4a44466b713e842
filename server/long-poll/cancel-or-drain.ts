// The held heartbeat: a worker's heartbeat that has nothing to say waits here until a cancel or a
// drain is for its worker, so the worker learns at once instead of at its next heartbeat.
import type { Response } from 'express';
import { abortOnHangUpOrStop } from './hang-up-or-stop.js';
import type { NotifyHub } from './notify-hub.js';

/**
 * Listens for a cancel or a drain addressed to this worker (by NOTIFY, from any server). `wait`
 * resolves true at once if one came already, or when one comes within `ms`; false when the time
 * runs out, the worker hangs up, or the server stops.
 */
export function listenForCancelOrDrain(ctx: { hub: NotifyHub; closing: AbortSignal }, workerId: string, res: Response) {
  const { abort: stopped, dispose } = abortOnHangUpOrStop(ctx, res);
  let heard = false;
  let wake = () => {};
  const onNews = (payload: string) => {
    // '' comes after the LISTEN connection was restored: what came meanwhile is unknown.
    if (payload !== workerId && payload !== '') return;
    heard = true;
    wake();
  };
  const offCancel = ctx.hub.on('skipjack_cancel', onNews);
  const offDrain = ctx.hub.on('skipjack_drain', onNews);
  return {
    wait(ms: number): Promise<boolean> {
      if (heard || stopped.signal.aborted) return Promise.resolve(heard);
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        const finish = () => {
          clearTimeout(timer);
          resolve(heard);
        };
        wake = finish;
        stopped.signal.addEventListener('abort', finish, { once: true });
      });
    },
    stop() {
      offCancel();
      offDrain();
      dispose();
      stopped.abort();
    },
  };
}

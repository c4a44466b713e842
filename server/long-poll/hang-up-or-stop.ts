// The abort every long-poll (a claim's, a held heartbeat's) ends on: its client hung up, or the
// server began to stop.
import type { Response } from 'express';

/**
 * Aborted when the client hangs up or the server begins to stop, also when either happened
 * before this was called: a long-poll that arrives once the stop has begun (a worker asks again
 * at once when answered empty) sees no abort event, and a closed hub wakes it at once, so it
 * would spin to its deadline.
 */
export function abortOnHangUpOrStop(
  ctx: { closing: AbortSignal },
  res: Response,
  superseded?: AbortSignal,
): { abort: AbortController; dispose(): void } {
  const abort = new AbortController();
  // The response's close, not the request's: a request closes once its body has been read.
  const onEnd = () => abort.abort();
  res.on('close', onEnd);
  ctx.closing.addEventListener('abort', onEnd);
  superseded?.addEventListener('abort', onEnd);
  if (ctx.closing.aborted || res.destroyed || superseded?.aborted) abort.abort();
  return {
    abort,
    dispose() {
      res.off('close', onEnd);
      ctx.closing.removeEventListener('abort', onEnd);
      superseded?.removeEventListener('abort', onEnd);
    },
  };
}

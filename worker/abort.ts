// Abort signals a long-lived worker combines again and again.

/**
 * A signal that aborts when `lasting` or `brief` does, and `dispose`, which unhooks it once it is
 * no longer needed. AbortSignal.any would do, but on Node 20 it keeps every signal it made
 * reachable from a long-lived one it was given (about 65 bytes a call, never freed), and a worker
 * makes one per claim and per heartbeat wait, for days.
 */
export function eitherAborts(lasting: AbortSignal, brief: AbortSignal): { signal: AbortSignal; dispose(): void } {
  const either = new AbortController();
  const onAbort = (event: Event) => either.abort((event.target as AbortSignal).reason);
  const dispose = () => {
    lasting.removeEventListener('abort', onAbort);
    brief.removeEventListener('abort', onAbort);
  };
  if (lasting.aborted || brief.aborted) either.abort(lasting.aborted ? lasting.reason : brief.reason);
  else {
    lasting.addEventListener('abort', onAbort, { once: true });
    brief.addEventListener('abort', onAbort, { once: true });
  }
  return { signal: either.signal, dispose };
}

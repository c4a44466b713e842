// SIGTERM/SIGINT: the first starts a graceful stop, a second one hurries it, a third gives up on
// whatever still waits for the server.
import type { Logger } from 'pino';

// One Ctrl-C can arrive twice: the terminal signals the whole process group, and npm (or tsx)
// passes it on to its child as well. A repeat this soon is the same request, not a second one.
const SAME_SIGNAL_MS = 1000;

export function onStopSignals(
  log: Logger,
  graceful: () => Promise<void>,
  hurry: () => void,
  giveUp: () => void = hurry,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let received = 0;
    let lastAt = 0;
    const handler = (signal: NodeJS.Signals) => {
      if (received > 0 && Date.now() - lastAt < SAME_SIGNAL_MS) return;
      received++;
      lastAt = Date.now();
      if (received === 1) {
        log.info({ signal }, 'stopping gracefully (send the signal again to stop running jobs now)');
        return void graceful().then(resolve, reject);
      }
      if (received === 2) {
        log.warn({ signal }, 'second signal: stopping running jobs now (a third stops waiting for the server)');
        return hurry();
      }
      log.warn({ signal }, 'third signal: waiting for the server no more');
      giveUp();
    };
    process.on('SIGTERM', handler);
    process.on('SIGINT', handler);
  });
}

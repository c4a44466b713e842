// SIGTERM/SIGINT: the first starts a graceful stop, a second one hurries it.
import type { Logger } from 'pino';

// One Ctrl-C can arrive twice: the terminal signals the whole process group, and npm (or tsx)
// passes it on to its child as well. A repeat this soon is the same request, not a second one.
const SAME_SIGNAL_MS = 1000;

export function onStopSignals(log: Logger, graceful: () => Promise<void>, hurry: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let stopping = false;
    let firstAt = 0;
    const handler = (signal: NodeJS.Signals) => {
      if (stopping && Date.now() - firstAt < SAME_SIGNAL_MS) return;
      if (stopping) {
        log.warn({ signal }, 'second signal: stopping running jobs now');
        return hurry();
      }
      stopping = true;
      firstAt = Date.now();
      log.info({ signal }, 'stopping gracefully (send the signal again to stop running jobs now)');
      graceful().then(resolve, reject);
    };
    process.on('SIGTERM', handler);
    process.on('SIGINT', handler);
  });
}

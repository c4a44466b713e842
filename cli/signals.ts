// SIGTERM/SIGINT: the first starts a graceful stop, a second one hurries it.
import type { Logger } from 'pino';

export function onStopSignals(log: Logger, graceful: () => Promise<void>, hurry: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let stopping = false;
    const handler = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, 'second signal: stopping running jobs now');
        return hurry();
      }
      stopping = true;
      log.info({ signal }, 'stopping gracefully (send the signal again to stop running jobs now)');
      graceful().then(resolve, reject);
    };
    process.on('SIGTERM', handler);
    process.on('SIGINT', handler);
  });
}

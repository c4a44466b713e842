// When a service job's process ends, whether to start it again: supervisord's autorestart and
// Nomad's restart stanza (attempts within an interval, a delay, then give up), with the give-up
// reported as a crash loop instead of spinning forever.
import type { ProcessResult } from './supervisor.js';

export interface RestartPolicy {
  policy: 'never' | 'on-failure' | 'always';
  maxRestarts: number;
  windowSeconds: number;
  delaySeconds: number;
  /** The delay grows by this factor for each restart in the window. */
  backoff: number;
}

export type RestartDecision =
  | { action: 'end' }
  | { action: 'restart'; delayMs: number; restartNumber: number }
  | { action: 'crash_loop'; error: string };

const MAX_DELAY_MS = 5 * 60_000;

export class RestartTracker {
  private restarts: number[] = [];
  private total = 0;

  constructor(private policy: RestartPolicy | null) {}

  /** Decides after a run ended on its own (exited or timed out); stops by us never restart. */
  decide(result: ProcessResult, now = Date.now()): RestartDecision {
    const p = this.policy;
    if (!p || p.policy === 'never' || !ranToEnd(result)) return { action: 'end' };
    const failed = result.reason !== 'exited' || result.exitCode !== 0;
    if (p.policy === 'on-failure' && !failed) return { action: 'end' };
    this.restarts = this.restarts.filter((t) => now - t < p.windowSeconds * 1000);
    if (this.restarts.length >= p.maxRestarts) {
      return {
        action: 'crash_loop',
        error: `crash loop: ${this.restarts.length} restarts within ${p.windowSeconds}s; last run ${describe(result)}`,
      };
    }
    const delayMs = Math.min(MAX_DELAY_MS, p.delaySeconds * 1000 * p.backoff ** this.restarts.length);
    this.restarts.push(now);
    return { action: 'restart', delayMs, restartNumber: ++this.total };
  }
}

const ranToEnd = (r: ProcessResult) => r.reason === 'exited' || r.reason === 'timed_out';

function describe(r: ProcessResult): string {
  if (r.reason === 'timed_out') return 'timed out';
  return r.signal ? `was killed by ${r.signal}` : `exited with code ${r.exitCode}`;
}

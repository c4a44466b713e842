// Percentiles and small number helpers.
export interface LatencySummary {
  n: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function summarize(samples: number[]): LatencySummary {
  const s = [...samples].sort((a, b) => a - b);
  const r = (v: number) => Math.round(v * 100) / 100;
  return {
    n: s.length,
    p50Ms: r(percentile(s, 50)),
    p90Ms: r(percentile(s, 90)),
    p99Ms: r(percentile(s, 99)),
    maxMs: r(s[s.length - 1] ?? NaN),
    meanMs: r(s.reduce((a, b) => a + b, 0) / Math.max(1, s.length)),
  };
}

export const round = (v: number, digits = 2) => Math.round(v * 10 ** digits) / 10 ** digits;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `done` every `everyMs` until it holds; a peer that stops making progress fails the run instead of hanging it. */
export async function pollUntil(
  what: string,
  done: () => boolean | Promise<boolean>,
  everyMs: number,
  timeoutMs = 600_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what}: not done within ${timeoutMs / 1000} s`);
    await sleep(everyMs);
  }
}

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
export const wallMs = () => performance.timeOrigin + performance.now();

/**
 * The latency scenario's load: one job every gapMs (sent with its send time), then wait up to
 * 30 s for `samples` to fill. Peers share it, so each is paced the same way.
 */
export async function sendPaced(
  n: number,
  gapMs: number,
  send: (sentAt: number) => Promise<unknown>,
  samples: number[],
  progress: { update(done: number): void },
): Promise<void> {
  await sleep(500);
  const t0 = wallMs();
  for (let i = 0; i < n; i++) {
    const wait = t0 + i * gapMs - wallMs();
    if (wait > 0) await sleep(wait);
    await send(wallMs());
    progress.update(samples.length);
  }
  const deadline = Date.now() + 30_000;
  while (samples.length < n && Date.now() < deadline) await sleep(20);
  progress.update(samples.length);
}

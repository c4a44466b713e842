// Commands for deploy tools and operators: enqueue (and wait), status, logs, cancel, workers, drain, deregister.
import { ApiRequestError, type SkipjackClient } from '../protocol/client.js';
import { terminalStates } from '../protocol/states.js';
import { Backoff, sleep } from '../worker/backoff.js';
import type { EnqueueJob } from '../protocol/schemas.js';
import type { JobView } from '../protocol/types.js';

export interface EnqueueFlags {
  queue?: string;
  priority?: number;
  env?: Record<string, string>;
  secretEnv?: Record<string, string>;
  cwd?: string;
  timeout?: number;
  maxAttempts?: number;
  runAt?: string;
  idempotencyKey?: string;
  region?: string[];
  cpu?: number;
  memory?: number;
  disk?: number;
  label?: Record<string, string>;
  prefer?: Record<string, string>;
  allowUnplaceable?: boolean;
  waitPlacement?: number;
  wait?: boolean;
  json?: boolean;
}

export function toEnqueueJob(command: string[], f: EnqueueFlags): EnqueueJob {
  const resources = f.cpu || f.memory || f.disk ? { cpu: f.cpu, memoryMb: f.memory, diskMb: f.disk } : undefined;
  const constraints =
    f.region || resources || f.label
      ? { region: f.region && (f.region.length === 1 ? f.region[0] : f.region), resources, labels: f.label }
      : undefined;
  return {
    command,
    queue: f.queue,
    priority: f.priority,
    env: { ...f.env, ...f.secretEnv },
    secretEnv: f.secretEnv ? Object.keys(f.secretEnv) : undefined,
    cwd: f.cwd,
    timeoutSeconds: f.timeout,
    maxAttempts: f.maxAttempts,
    runAt: f.runAt,
    idempotencyKey: f.idempotencyKey,
    constraints,
    preferences: f.prefer ? Object.entries(f.prefer).map(([k, v]) => ({ labels: { [k]: v }, weight: 1 })) : undefined,
    allowUnplaceable: f.allowUnplaceable,
    placementDeadlineSeconds: f.waitPlacement,
  };
}

/** The flag that set each field of the enqueue body (see toEnqueueJob), for the server's errors. */
const FLAG_OF_FIELD: [field: string, flag: string][] = [
  ['body.command', 'the command after --'],
  ['body.queue', '--queue'],
  ['body.priority', '--priority'],
  ['body.env', '--env or --secret-env'],
  ['body.cwd', '--cwd'],
  ['body.timeoutSeconds', '--timeout'],
  ['body.maxAttempts', '--max-attempts'],
  ['body.runAt', '--run-at'],
  ['body.idempotencyKey', '--idempotency-key'],
  ['body.constraints.region', '--region'],
  ['body.constraints.resources.cpu', '--cpu'],
  ['body.constraints.resources.memoryMb', '--memory'],
  ['body.constraints.resources.diskMb', '--disk'],
  ['body.constraints.labels', '--label'],
  ['body.preferences', '--prefer'],
  ['body.placementDeadlineSeconds', '--wait-placement'],
];

/** A refused enqueue's message names body fields; say which flag set the one it names. */
export function withFlagNamed(message: string): string {
  const hit = FLAG_OF_FIELD.find(([field]) => message.includes(field));
  return hit ? `${message}\n(set by ${hit[1]})` : message;
}

/** Enqueues; with --wait streams the output and returns the job's exit code for the CLI to exit with. */
export async function enqueue(client: SkipjackClient, command: string[], f: EnqueueFlags): Promise<number> {
  const job = await client.enqueue(toEnqueueJob(command, f));
  if (job.waitingReason) process.stderr.write(`job ${job.id} waits: ${job.waitingReason}\n`);
  if (f.waitPlacement !== undefined) {
    const placed = await waitForPlacement(client, job.id);
    if (!placed.ok) {
      process.stderr.write(`job ${job.id} was not placed: ${placed.why}\n`);
      return 3;
    }
  }
  if (!f.wait) {
    process.stdout.write(f.json ? JSON.stringify(job, null, 2) + '\n' : `${job.id}\n`);
    return 0;
  }
  process.stderr.write(`job ${job.id} enqueued; waiting for it\n`);
  return followToEnd(client, job.id);
}

/** Streams the job's output until it ends, says how it ended, and returns its exit code for the CLI. */
export async function followToEnd(client: SkipjackClient, id: number): Promise<number> {
  await followLogs(client, id);
  const final = await client.getJob(id);
  process.stderr.write(`job ${id} ${describeEnd(final)}\n`);
  return exitCodeOf(final);
}

/** Waits until the server places the job or fails it at its placement deadline. */
async function waitForPlacement(
  client: SkipjackClient,
  id: number,
): Promise<{ ok: true } | { ok: false; why: string }> {
  for (;;) {
    const job = await client.getJob(id);
    if (job.state === 'failed' && job.endReason === 'unplaceable')
      return { ok: false, why: job.error ?? 'unplaceable' };
    if (job.state !== 'pending') return { ok: true };
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Streams a job's output until the job ends. The stream ends with the job; if the connection
 * drops first (a server restart), it reconnects and skips the bytes already printed, since the
 * server replays a job's output from its start.
 */
export async function followLogs(client: SkipjackClient, id: number): Promise<void> {
  let printed = 0;
  const backoff = new Backoff(200, 5000);
  for (;;) {
    try {
      const res = await client.raw('GET', `/jobs/${id}/logs?follow=1`, undefined, 7 * 86_400_000);
      if (res.status >= 400)
        throw new ApiRequestError(res.status, await res.body.toArray().then((b) => Buffer.concat(b).toString()));
      let seen = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        const fresh = chunk.subarray(Math.max(0, printed - seen));
        seen += chunk.length;
        if (fresh.length) process.stdout.write(fresh);
        printed = Math.max(printed, seen);
      }
      if (terminalStates.includes((await client.getJob(id)).state)) return;
    } catch (err) {
      if (err instanceof ApiRequestError && err.status < 500) throw err;
    }
    await sleep(backoff.next());
  }
}

export function describeEnd(job: JobView): string {
  const how = job.signal
    ? `signal ${job.signal}`
    : job.exitCode !== null
      ? `exit code ${job.exitCode}`
      : (job.endReason ?? '');
  return `${job.state}${how ? ` (${how})` : ''}${job.error ? `: ${job.error}` : ''}`;
}

/** The job's own exit code; 128+n for a signal, as shells report it; 1 for any other failure. */
export function exitCodeOf(job: JobView): number {
  if (job.state === 'succeeded') return 0;
  if (job.exitCode !== null && job.exitCode !== 0) return job.exitCode;
  if (job.signal) return 128 + (signalNumber(job.signal) ?? 15);
  return 1;
}

function signalNumber(name: string): number | undefined {
  const numbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };
  return numbers[name];
}

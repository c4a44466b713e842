// A typed HTTP client for the wire API, shared by the worker and the CLI.
import type { CreateSchedule, ScheduleView } from './schedules.js';
import type { Readable } from 'node:stream';
import { Agent, request, type Dispatcher } from 'undici';
import type { EnqueueJob, LogChunk, RegisterWorker, Release, ReleaseItem, RestartReport } from './schemas.js';
import type {
  ApiError,
  ClaimedJob,
  JobView,
  PlacementExplanation,
  RegisterResponse,
  WorkerHeartbeatResponse,
  ServerTime,
  WorkerView,
} from './types.js';

/** One outcome's answer in a batch: released, or refused (its lease was no longer live). */
export type ReleaseResult = { jobId: number; ok: true } | { jobId: number; ok: false; error: string; message: string };

export class ApiRequestError extends Error {
  constructor(
    readonly status: number,
    readonly body: ApiError | string,
  ) {
    super(typeof body === 'string' ? `HTTP ${status}: ${body}` : `HTTP ${status} ${body.error}: ${body.message}`);
  }
  get code(): string | undefined {
    return typeof this.body === 'string' ? undefined : this.body?.error;
  }
  /**
   * Worth sending again: the server had trouble (5xx), asked for patience (408, 429), or the
   * answer is not the API's own (no error code: a proxy's or a load balancer's page), so it says
   * nothing about the request itself.
   */
  get retryable(): boolean {
    return this.status >= 500 || this.status === 408 || this.status === 429 || this.code === undefined;
  }
}

/** The API itself refused the request, and would again: sending it once more is no use. */
export const refusedForGood = (err: unknown): err is ApiRequestError =>
  err instanceof ApiRequestError && !err.retryable;

/**
 * A 2xx answer that is not the API's: a proxy's or a gateway's own page, or a body cut off. The
 * request may or may not have reached the server; like an outage, it is worth sending again.
 */
export class NotTheApiError extends Error {}

/** The server could not be reached at all (as opposed to answering with an error). */
export class UnreachableError extends Error {
  /** The system's error code (ECONNREFUSED, ECONNRESET, UND_ERR_SOCKET...), when there is one. */
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

export interface ClientOptions {
  baseUrl: string;
  token?: string;
  /** Per-request timeout; long-polls add their wait to it. */
  timeoutMs?: number;
}

export interface RawResponse {
  status: number;
  contentType: string;
  body: Readable;
}

// undici's own request API over one keep-alive agent: about a third of fetch's cost per call,
// which matters to a worker that claims, heartbeats and releases all day.
const agent = new Agent({ keepAliveTimeout: 30_000 });

export class SkipjackClient {
  readonly baseUrl: string;
  constructor(private opts: ClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
  }

  /** A JSON endpoint's answer. A 2xx that is not JSON (a proxy's own page, a body cut off) is a NotTheApiError. */
  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    extraTimeoutMs = 0,
    signal?: AbortSignal,
    extraHeaders?: Record<string, string>,
  ): Promise<T> {
    const res = await this.raw(method, path, body, extraTimeoutMs, signal, extraHeaders);
    const text = await readText(res.body);
    const isJson = res.contentType.includes('json');
    if (res.status >= 400)
      throw new ApiRequestError(res.status, text && isJson ? (parseOr(text, text) as ApiError | string) : text);
    if (!text) return undefined as T; // 204
    const parsed = isJson ? parseOr(text, undefined) : undefined;
    if (parsed === undefined)
      throw new NotTheApiError(
        `the answer to ${method} ${path} is not the API's (${res.contentType || 'no content type'}): ${JSON.stringify(text.slice(0, 80))}`,
      );
    return parsed as T;
  }

  /**
   * `signal` stops the wait for an answer, not the reading of one that has begun: a claim's
   * answer holds jobs the server has already started for us, and dropped unread they would sit
   * under a lease nobody holds until it expired (seen once as a 33 s start).
   */
  async raw(
    method: string,
    path: string,
    body?: unknown,
    extraTimeoutMs = 0,
    signal?: AbortSignal,
    extraHeaders?: Record<string, string>,
  ): Promise<RawResponse> {
    const timeoutMs = (this.opts.timeoutMs ?? 15_000) + extraTimeoutMs;
    const headers: Record<string, string> = { ...extraHeaders };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
    const untilAnswer = new AbortController();
    const stop = () => untilAnswer.abort(signal?.reason);
    if (signal?.aborted) stop();
    signal?.addEventListener('abort', stop);
    try {
      const res = await request(this.baseUrl + path, {
        method: method as Dispatcher.HttpMethod,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: untilAnswer.signal,
        dispatcher: agent,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      return { status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), body: res.body };
    } catch (err) {
      const e = err as Error & { code?: string };
      throw new UnreachableError(
        `cannot reach ${this.baseUrl}: ${e.code ?? ''} ${e.message}`.replace(/\s+/g, ' ').trim(),
        e.code,
      );
    } finally {
      signal?.removeEventListener('abort', stop);
    }
  }

  enqueue(job: EnqueueJob): Promise<JobView> {
    return this.request('POST', '/jobs', job);
  }
  saveSchedule(schedule: CreateSchedule): Promise<ScheduleView> {
    return this.request('POST', '/schedules', schedule);
  }
  schedules(): Promise<{ schedules: ScheduleView[] }> {
    return this.request('GET', '/schedules');
  }
  async removeSchedule(name: string): Promise<void> {
    await this.request('DELETE', `/schedules/${encodeURIComponent(name)}`);
  }
  enqueueBatch(jobs: EnqueueJob[]): Promise<{ jobs: JobView[] }> {
    return this.request('POST', '/jobs', { jobs });
  }
  getJob(id: number): Promise<JobView> {
    return this.request('GET', `/jobs/${id}`);
  }
  listJobs(
    query: { state?: string; queue?: string; cursor?: number; limit?: number } = {},
  ): Promise<{ jobs: JobView[]; nextCursor: number | null }> {
    const qs = new URLSearchParams(
      Object.entries(query)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, String(v)]),
    );
    return this.request('GET', `/jobs?${qs}`);
  }
  /** Every live worker's verdict on the job: why it runs where it does, or waits. */
  placement(id: number): Promise<PlacementExplanation> {
    return this.request('GET', `/jobs/${id}/placement`);
  }
  cancel(id: number): Promise<JobView> {
    return this.request('POST', `/jobs/${id}/cancel`);
  }
  async logs(id: number): Promise<string> {
    const res = await this.raw('GET', `/jobs/${id}/logs`);
    const text = await readText(res.body);
    if (res.status >= 400)
      throw new ApiRequestError(
        res.status,
        res.contentType.includes('json') ? (parseOr(text, text) as ApiError | string) : text,
      );
    return text;
  }
  register(w: RegisterWorker): Promise<RegisterResponse> {
    return this.request('POST', '/workers', w);
  }
  workers(): Promise<{ workers: WorkerView[] }> {
    return this.request('GET', '/workers');
  }
  drain(workerId: string): Promise<WorkerView> {
    return this.request('POST', `/workers/${workerId}/drain`);
  }
  /** The jobs the server says this worker holds leases on, as a claim answers with them. */
  heldJobs(workerId: string, workerKey?: string): Promise<{ jobs: ClaimedJob[] } & ServerTime> {
    return this.request(
      'GET',
      `/workers/${workerId}/leases`,
      undefined,
      0,
      undefined,
      workerKey ? { 'x-worker-key': workerKey } : undefined,
    );
  }
  /** Asks the server to answer this worker's waiting long-poll now, with what it has (a worker token needs the worker's key). */
  endPoll(workerId: string, workerKey?: string): Promise<void> {
    return this.request(
      'POST',
      `/workers/${workerId}/end-poll`,
      undefined,
      0,
      undefined,
      workerKey ? { 'x-worker-key': workerKey } : undefined,
    );
  }
  /** `workerKey` (from the registration) lets a worker token deregister this worker: its own. */
  deregister(workerId: string, workerKey?: string): Promise<WorkerView> {
    return this.request(
      'DELETE',
      `/workers/${workerId}`,
      undefined,
      0,
      undefined,
      workerKey ? { 'x-worker-key': workerKey } : undefined,
    );
  }
  workerHeartbeat(
    workerId: string,
    leases: { jobId: number; leaseToken: string }[],
    waitMs = 0,
    signal?: AbortSignal,
  ): Promise<WorkerHeartbeatResponse> {
    return this.request(
      'POST',
      `/workers/${workerId}/heartbeat`,
      { leases, ...(waitMs > 0 ? { waitMs } : {}) },
      waitMs,
      signal,
    );
  }
  claim(
    workerId: string,
    max: number,
    waitMs = 0,
    signal?: AbortSignal,
    releases?: ReleaseItem[],
  ): Promise<{ jobs: ClaimedJob[]; releases?: ReleaseResult[] } & ServerTime> {
    return this.request(
      'POST',
      '/claims',
      { workerId, max, waitMs, ...(releases?.length ? { releases } : {}) },
      waitMs,
      signal,
    );
  }
  appendLogs(jobId: number, leaseToken: string, chunks: LogChunk[]): Promise<{ end: number; stored: number }> {
    return this.request('POST', `/jobs/${jobId}/logs`, { leaseToken, chunks });
  }
  restart(jobId: number, report: RestartReport): Promise<{ run: number }> {
    return this.request('POST', `/jobs/${jobId}/restart`, report);
  }
  release(jobId: number, release: Release): Promise<JobView> {
    return this.request('POST', `/jobs/${jobId}/release`, release);
  }
}

function parseOr(text: string, otherwise: unknown): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return otherwise;
  }
}

async function readText(body: Readable): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of body) parts.push(chunk as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

// A proxy on loopback in front of a test server. `intercept` sees each request (its body parsed)
// and may answer it itself, "reset" it (the server never sees it), or "drop" its answer (the
// server acts on it, and the caller sees its connection cut instead of the answer); anything else
// is passed through. A caller that hangs up (a long-poll it gave up on) makes the proxy hang up on
// the server too, or the server would hand jobs to a claim nobody reads.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Verdict = { status: number; type: string; body: string } | 'reset' | 'drop' | undefined;

export interface TestProxy {
  url: string;
  /** The URL of every request, in order of arrival. */
  requests: string[];
  /** Requests whose caller hung up before the answer. */
  hangUps: string[];
  faults: { reset: number; dropped: number };
  close(): Promise<void>;
}

const PASSED_HEADERS = ['content-type', 'authorization', 'x-worker-key', 'idempotency-key'];

export async function startProxy(
  target: string,
  intercept: (url: string, body: Record<string, unknown>) => Verdict = () => undefined,
): Promise<TestProxy> {
  const requests: string[] = [];
  const hangUps: string[] = [];
  const faults = { reset: 0, dropped: 0 };
  const server = createServer(async (req, res) => {
    const url = req.url ?? '';
    requests.push(url);
    let cutByUs = false;
    res.on('close', () => {
      if (!res.writableFinished && !cutByUs) hangUps.push(url);
    });
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const verdict = intercept(url, parsed(body));
    const cut = (kind: keyof typeof faults) => {
      cutByUs = true;
      faults[kind]++;
      req.socket.destroy();
    };
    if (verdict === 'reset') return cut('reset');
    if (typeof verdict === 'object') {
      res.writeHead(verdict.status, { 'content-type': verdict.type });
      return void res.end(verdict.body);
    }
    const hungUp = new AbortController();
    res.on('close', () => hungUp.abort());
    try {
      const headers = Object.fromEntries(
        PASSED_HEADERS.filter((h) => req.headers[h]).map((h) => [h, String(req.headers[h])]),
      );
      const answer = await fetch(target + url, {
        method: req.method,
        headers,
        body: chunks.length ? body : undefined,
        signal: hungUp.signal,
      });
      const bytes = Buffer.from(await answer.arrayBuffer());
      if (verdict === 'drop') return cut('dropped');
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
      res.end(bytes);
    } catch {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    hangUps,
    faults,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function parsed(body: Buffer): Record<string, unknown> {
  try {
    return JSON.parse(body.toString() || '{}');
  } catch {
    return {};
  }
}

/** mulberry32: small, seeded, good enough to pick faults. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

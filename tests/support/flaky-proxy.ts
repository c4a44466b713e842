// A proxy on loopback that loses requests and answers on purpose, for chaos tests: a request it
// "resets" never reaches the server; one whose answer it "drops" does, and the caller sees its
// connection cut instead of the answer. Faults come from a seeded generator, so a failing run can
// be told apart from another by its seed.
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FlakyProxy {
  url: string;
  /** Faults so far, by kind. */
  faults: { reset: number; dropped: number };
  /** No more faults from now on. */
  calm(): void;
  close(): Promise<void>;
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

export async function startFlakyProxy(target: string, opts: { seed: number; resetRate: number; dropRate: number }): Promise<FlakyProxy> {
  const random = seededRandom(opts.seed);
  const faults = { reset: 0, dropped: 0 };
  let calm = false;
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const roll = calm ? 1 : random();
    if (roll < opts.resetRate) {
      faults.reset++;
      return void req.socket.destroy();
    }
    const drop = roll < opts.resetRate + opts.dropRate;
    // The caller hanging up (a long-poll it gave up on) hangs up on the server too.
    const hungUp = new AbortController();
    res.on('close', () => hungUp.abort());
    try {
      const headers: Record<string, string> = { 'content-type': req.headers['content-type'] ?? 'application/json' };
      for (const h of ['authorization', 'x-worker-key', 'idempotency-key']) if (req.headers[h]) headers[h] = String(req.headers[h]);
      const answer = await fetch(target + req.url, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined, signal: hungUp.signal });
      const body = Buffer.from(await answer.arrayBuffer());
      if (drop) {
        faults.dropped++;
        return void req.socket.destroy();
      }
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
      res.end(body);
    } catch {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    faults,
    calm: () => void (calm = true),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

// The client's abort signal stops the wait for an answer, not the reading of an answer that has
// begun: a claim's answer holds jobs the server already started, and must not be dropped.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SkipjackClient } from '../../protocol/client.js';

let server: Server;
let base: string;
let headersSent: () => void;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/slow-answer') return void setTimeout(() => res.end('{"jobs":[]}'), 1000).unref();
    // Headers now, the body a little later: the window in which the caller gives up.
    res.writeHead(200, { 'content-type': 'application/json' });
    res.flushHeaders();
    headersSent();
    setTimeout(() => res.end('{"jobs":[{"id":7}]}'), 100);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

test('an abort after the answer began still returns the answer', async () => {
  const client = new SkipjackClient({ baseUrl: base });
  const abort = new AbortController();
  const sent = new Promise<void>((r) => (headersSent = r));
  const answer = client.request<{ jobs: { id: number }[] }>('POST', '/answer', {}, 0, abort.signal);
  await sent;
  await new Promise((r) => setTimeout(r, 30)); // the headers have reached the client by now
  abort.abort();
  expect((await answer).jobs.map((j) => j.id)).toEqual([7]);
});

test('an abort before any answer stops the request', async () => {
  const client = new SkipjackClient({ baseUrl: base });
  const abort = new AbortController();
  const answer = client.request('POST', '/slow-answer', {}, 0, abort.signal);
  setTimeout(() => abort.abort(), 50);
  await expect(answer).rejects.toThrow();
});

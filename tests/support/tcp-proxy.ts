// A TCP proxy on loopback that can leave its connections half-open: `freeze` stops forwarding on
// every connection it has (neither side hears anything more, and neither is closed), as a NAT that
// forgot a connection does. Connections made after it pass as ever.
import { createServer, connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpProxy {
  port: number;
  /** Connections accepted so far. */
  accepted: number;
  freeze(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const pairs: [Socket, Socket][] = [];
  const proxy: TcpProxy = {
    port: 0,
    accepted: 0,
    freeze() {
      for (const [a, b] of pairs.splice(0)) {
        a.unpipe(b);
        b.unpipe(a);
        a.pause();
        b.pause();
        frozen.push(a, b);
      }
    },
    async close() {
      for (const s of [...frozen, ...pairs.flat()]) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  const frozen: Socket[] = [];
  const server = createServer((client) => {
    proxy.accepted++;
    const upstream = connect(targetPort, targetHost);
    pairs.push([client, upstream]);
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.port = (server.address() as AddressInfo).port;
  return proxy;
}

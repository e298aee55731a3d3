// An OTLP/HTTP endpoint that takes every export and answers 200, for the tracing-on gateway of the bench:
// the gateway does all of its tracing work (spans, batches, encoding, the POST); nothing is kept.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export async function startOtlpSink(): Promise<{
  url: string;
  exportedBytes: () => number;
  close(): Promise<void>;
}> {
  let bytes = 0;
  const server: Server = createServer((req, res) => {
    req.on('data', (c: Buffer) => {
      bytes += c.length;
    });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exportedBytes: () => bytes,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

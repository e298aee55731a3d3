// Back-pressure writes against a real connection: a write to a response whose connection is already
// closed returns at once instead of waiting for a 'drain' or 'close' that never comes.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { write } from '../../proxy/send.ts';

test('write() to a response closed under it settles at once instead of waiting for a drain that never comes', async (t) => {
  const closed = Promise.withResolvers<ServerResponse>();
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: first\n\n');
    res.on('close', () => closed.resolve(res));
    // The drain timeout's closeAllConnections, as the gateway calls it at shutdown.
    server.closeAllConnections();
  });
  t.after(() => server.close());
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = request({ port: (server.address() as AddressInfo).port, host: '127.0.0.1' }, (res) =>
    res.resume().on('error', () => {}),
  );
  client.on('error', () => {});
  client.end();

  const res = await closed.promise;
  const pending = write(res, Buffer.alloc(1 << 20));
  // Either no wait at all, or one that ends: never a promise left hanging.
  if (pending !== undefined) await pending;
  assert.equal(res.closed, true);
});

// The gateway's webhook pass-through on its own: a sidecar that drops the connection while it restarts
// gets the webhook again, an unsupervised sidecar is not waited for, and the body cap holds for chunked
// bodies too.

import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import pino from 'pino';
import type { RouterConfig } from '../../common/config-types.ts';
import type { SidecarStatus } from '../../proxy/sidecar-status.ts';
import { forwardToSidecar } from '../../proxy/webhook-forward.ts';

const log = pino({ level: 'silent' });

function listen(server: Server): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** Only the fields the forwarder reads. */
function config(sidecarPort: number, maxBodyBytes = 1024): RouterConfig {
  return {
    billing: {
      listen: { host: '127.0.0.1', port: sidecarPort },
      balanceEnforcement: { webhookMaxBodyBytes: maxBodyBytes },
    },
    limits: { clientBodyTimeoutMs: 5000 },
    sidecar: { webhookWaitMs: 5000 },
  } as unknown as RouterConfig;
}

const up = (supervised: boolean): SidecarStatus => ({
  supervised,
  state: 'up',
  whenUp: () => Promise.resolve(true),
});

/** A stand-in sidecar: drops the first `drops` connections, then answers 204 and keeps the bodies. */
function sidecar(drops: number): { server: Server; bodies: string[]; connections: () => number } {
  const bodies: string[] = [];
  let seen = 0;
  const server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      text += c;
    });
    req.on('end', () => {
      bodies.push(text);
      res.writeHead(204);
      res.end();
    });
  });
  server.on('connection', (socket) => {
    if (seen++ < drops) socket.destroy();
  });
  return { server, bodies, connections: () => seen };
}

let gateway: Server;
let gatewayUrl: string;
let route: (req: IncomingMessage, res: import('node:http').ServerResponse) => Promise<void>;

before(async () => {
  gateway = createServer((req, res) => {
    void route(req, res);
  });
  gatewayUrl = `http://127.0.0.1:${await listen(gateway)}`;
});
after(() => close(gateway));

test('a supervised sidecar that drops the connection gets the same bytes again', async () => {
  const side = sidecar(2);
  const port = await listen(side.server);
  route = (req, res) => forwardToSidecar(config(port), req, res, log, up(true));
  try {
    const body = '{"id":"evt_1","type":"wallet.balance_changed"}';
    const res = await fetch(`${gatewayUrl}/internal/billing/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    assert.equal(res.status, 204);
    assert.deepEqual(side.bodies, [body]);
    assert.equal(side.connections(), 3);
  } finally {
    await close(side.server);
  }
});

test('an unsupervised sidecar that drops the connection: 503 at once, nothing repeated', async () => {
  const side = sidecar(1);
  const port = await listen(side.server);
  route = (req, res) => forwardToSidecar(config(port), req, res, log, up(false));
  try {
    const res = await fetch(`${gatewayUrl}/internal/billing/webhook`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 503);
    const body = (await res.json()) as { error: { code: string } };
    assert.equal(body.error.code, 'sidecar_unavailable');
    assert.equal(side.connections(), 1);
    assert.deepEqual(side.bodies, []);
  } finally {
    await close(side.server);
  }
});

test('a chunked body over the cap is refused with 413 and never reaches the sidecar', async () => {
  const side = sidecar(0);
  const port = await listen(side.server);
  route = (req, res) => forwardToSidecar(config(port, 64), req, res, log, up(true));
  try {
    const chunks = [new TextEncoder().encode('x'.repeat(40)), new TextEncoder().encode('y'.repeat(40))];
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = chunks.shift();
        if (next === undefined) controller.close();
        else controller.enqueue(next);
      },
    });
    const res = await fetch(`${gatewayUrl}/internal/billing/webhook`, {
      method: 'POST',
      body: stream,
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 413);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'payload_too_large');
    assert.equal(side.connections(), 0);
  } finally {
    await close(side.server);
  }
});

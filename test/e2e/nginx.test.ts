// deploy/nginx/router.conf with a real nginx in front of an in-process gateway, the upstream simulator and
// a billing sidecar: streams are relayed event by event, keep-alive to the gateway, request id and
// X-Forwarded-For pass through, webhooks reach the sidecar, oversized bodies get 413 from nginx.

import assert from 'node:assert/strict';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { type Sidecar, startSidecar } from '../../sidecar/sidecar.ts';
import { type HeldStreamUpstream, startHeldStreamUpstream } from '../support/held-stream.ts';
import { findNginx, type RunningNginx, startNginx } from '../support/nginx.ts';
import { simProvider } from '../support/sim-providers.ts';
import { ACCESS_KEY, type Stack, startStack } from '../support/stack.ts';

const WEBHOOK_PATH = '/internal/billing/webhook';
const hostPort = (url: string) => new URL(url).host;
const HELD_BEFORE = 3;
const HELD_AFTER = 4;

describe('nginx in front of the gateway', {
  skip: findNginx() === undefined && 'nginx not installed',
}, () => {
  let stack: Stack;
  let sidecar: Sidecar;
  let nginx: RunningNginx;
  let holder: HeldStreamUpstream;
  const seenByGateway: { url: string; httpVersion: string; headers: IncomingHttpHeaders }[] = [];
  let gatewayConnections = 0;
  const webhooks: { headers: IncomingHttpHeaders; body: string }[] = [];

  before(async () => {
    holder = await startHeldStreamUpstream(HELD_BEFORE, HELD_AFTER);
    stack = await startStack({
      providers: { holder: simProvider('holder') },
      baseUrls: { holder: holder.url },
    });
    const server = stack.gateway.gateway.server;
    server.on('connection', () => {
      gatewayConnections++;
    });
    server.on('request', (req: IncomingMessage) => {
      seenByGateway.push({ url: req.url ?? '', httpVersion: req.httpVersion, headers: req.headers });
    });
    sidecar = await startSidecar(
      { kind: 'billing-only', billing: stack.gateway.config().billing },
      {
        listen: { host: '127.0.0.1', port: 0 },
        routes: [
          [
            `POST ${WEBHOOK_PATH}`,
            async (req, res) => {
              const chunks: Buffer[] = [];
              for await (const chunk of req) chunks.push(chunk as Buffer);
              webhooks.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
              res.writeHead(204);
              res.end();
            },
          ],
        ],
      },
    );
    nginx = await startNginx({ gateway: hostPort(stack.url), sidecar: hostPort(sidecar.url) });
  });

  after(async () => {
    await nginx?.close();
    await sidecar?.close();
    await stack?.close();
    await holder?.close();
  });

  test('a stream passes through delta by delta: what the upstream sent arrives while it holds the rest', async () => {
    const res = await fetch(`${nginx.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ACCESS_KEY}`,
        'content-type': 'application/json',
        'x-router-provider': 'holder',
      },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        stream: true,
        messages: [{ role: 'user', content: 'hello' }],
      }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(res.headers.get('content-encoding'), null);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let deltas = 0;
    let done = false;
    // Reads events until `want` content deltas have arrived (or the stream ends).
    const readDeltas = async (want: number): Promise<void> => {
      while (deltas < want && !done) {
        const next = await reader.read();
        if (next.done) return;
        buffer += decoder.decode(next.value, { stream: true });
        let sep = buffer.indexOf('\n\n');
        while (sep !== -1) {
          const data = buffer.slice(0, sep).replace(/^data: /, '');
          buffer = buffer.slice(sep + 2);
          sep = buffer.indexOf('\n\n');
          if (data === '[DONE]') done = true;
          else if (
            (JSON.parse(data) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta
              ?.content
          )
            deltas++;
        }
      }
    };
    // The upstream holds everything after its first deltas until release(): a proxy that buffered the
    // reply would never hand these over, and the test would time out here.
    await readDeltas(HELD_BEFORE);
    assert.equal(deltas, HELD_BEFORE);
    assert.equal(done, false, 'the stream is still open while the upstream holds it');
    holder.release();
    await readDeltas(Number.POSITIVE_INFINITY);
    assert.ok(done, 'the stream ended with [DONE]');
    assert.equal(deltas, HELD_BEFORE + HELD_AFTER);
  });

  test('keep-alive HTTP/1.1 to the gateway; nginx ids the request, the client id and X-Forwarded-For pass through', async () => {
    const before = gatewayConnections;
    seenByGateway.length = 0;
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${nginx.url}/v1/models`, {
        headers: {
          authorization: `Bearer ${ACCESS_KEY}`,
          'x-forwarded-for': '203.0.113.9',
          'x-router-request-id': `nginx-rid-${i}`,
        },
      });
      assert.equal(res.status, 200);
      // nginx's unique id is the billing id; the client's own becomes the correlation id.
      assert.match(res.headers.get('x-router-request-id') ?? '', /^[0-9a-f]{32}$/);
      assert.equal(res.headers.get('x-router-correlation-id'), `nginx-rid-${i}`);
      await res.arrayBuffer();
    }
    assert.equal(seenByGateway.length, 5);
    assert.ok(gatewayConnections - before <= 1, `nginx opened ${gatewayConnections - before} connections`);
    for (const [i, seen] of seenByGateway.entries()) {
      assert.equal(seen.httpVersion, '1.1');
      assert.notEqual(seen.headers.connection, 'close');
      assert.equal(seen.headers['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
      assert.equal(seen.headers['x-real-ip'], '127.0.0.1');
      assert.equal(seen.headers['x-forwarded-proto'], 'http');
      assert.match(String(seen.headers['x-router-request-id']), /^[0-9a-f]{32}$/);
      assert.equal(seen.headers['x-router-correlation-id'], `nginx-rid-${i}`);
    }
  });

  test('nginx assigns the id that the gateway uses and the access log records', async () => {
    seenByGateway.length = 0;
    const res = await fetch(`${nginx.url}/v1/models`, {
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'x-router-request-id': 'not valid!' },
    });
    await res.arrayBuffer();
    const id = res.headers.get('x-router-request-id') ?? '';
    assert.match(id, /^[0-9a-f]{32}$/);
    assert.equal(seenByGateway[0]?.headers['x-router-request-id'], id);
    // The access line is written when the request ends; nginx has finished it before replying fully.
    const lines = (await nginx.accessLog()).trim().split('\n');
    const entry = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((e) => e.request_id === id);
    assert.ok(entry, 'access log has the request id');
    assert.equal(entry.path, '/v1/models');
    assert.equal(entry.status, 200);
  });

  test('the access log never has the query string or credentials', async () => {
    const res = await fetch(`${nginx.url}/v1beta/models?key=${ACCESS_KEY}`);
    await res.arrayBuffer();
    assert.equal(res.status, 200);
    const log = await nginx.accessLog();
    assert.ok(log.includes('/v1beta/models'));
    assert.ok(!log.includes(ACCESS_KEY), 'access key in the access log');
  });

  test('a webhook POSTed to nginx reaches the sidecar with its raw body and signature headers', async () => {
    const before = seenByGateway.length;
    const body = '{"id":"evt_nginx_1","type":"wallet.balance_changed","data":{"subject_id":"client-a"}}';
    const res = await fetch(`${nginx.url}${WEBHOOK_PATH}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-billing-webhook-timestamp': '1760000000',
        'x-billing-webhook-signature': 'v1=abc123',
        'x-forwarded-for': '198.51.100.4',
      },
      body,
    });
    assert.equal(res.status, 204);
    const [webhook] = webhooks;
    assert.equal(webhooks.length, 1);
    assert.ok(webhook);
    assert.equal(webhook.body, body);
    assert.equal(webhook.headers['x-billing-webhook-signature'], 'v1=abc123');
    assert.equal(webhook.headers['x-billing-webhook-timestamp'], '1760000000');
    assert.equal(webhook.headers['x-forwarded-for'], '198.51.100.4, 127.0.0.1');
    assert.equal(seenByGateway.length, before, 'the webhook went through the gateway');
  });

  test('bodies over the gateway limit get 413 from nginx', async () => {
    const before = seenByGateway.length;
    assert.equal(
      await statusForDeclaredLength(`${nginx.url}/v1/chat/completions`, 10 * 1024 * 1024 + 1),
      413,
    );
    assert.equal(await statusForDeclaredLength(`${nginx.url}${WEBHOOK_PATH}`, 1024 * 1024 + 1), 413);
    assert.equal(seenByGateway.length, before);
    assert.equal(webhooks.length, 1);
  });

  test('/metrics is not served through the public front', async () => {
    const res = await fetch(`${nginx.url}/metrics`);
    await res.arrayBuffer();
    assert.equal(res.status, 404);
  });
});

/** Status nginx answers to a POST declaring `length` bytes (the body is never sent). */
function statusForDeclaredLength(url: string, length: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(length) },
    });
    req.once('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    req.once('error', reject);
    req.flushHeaders();
  });
}

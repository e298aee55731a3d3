// Realtime sessions through deploy/nginx/router.conf (a real nginx) in front of a gateway with billing:
// the WebSocket upgrade reaches the gateway with nginx's request id and forwarding headers, every frame
// crosses unchanged both ways (text and binary, compared with the upstream simulator's recording), each
// model response is billed once under `<nginx request id>:<response id>`, the client's access key never
// reaches the upstream or nginx's access log, and upgrades are forwarded on the realtime paths only.

import assert from 'node:assert/strict';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import { findNginx, type RunningNginx, startNginx } from '../support/nginx.ts';
import { RealtimeClient } from '../support/realtime-client.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const GEMINI_PATH = '/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';
const hostPort = (url: string) => new URL(url).host;

describe('realtime sessions through nginx', {
  skip: findNginx() === undefined && 'nginx not installed',
}, () => {
  let stack: BillingStack;
  let nginx: RunningNginx;
  let wsBase: string;
  /** Upgrade requests as the gateway received them (copied before the gateway reads them). */
  const upgrades: { url: string; httpVersion: string; headers: IncomingHttpHeaders }[] = [];

  before(async () => {
    stack = await startBillingStack();
    const gateway = stack.gateway;
    const sidecar = stack.sidecar;
    assert.ok(gateway && sidecar);
    gateway.gateway.server.prependListener('upgrade', (req: IncomingMessage) => {
      upgrades.push({ url: req.url ?? '', httpVersion: req.httpVersion, headers: { ...req.headers } });
    });
    nginx = await startNginx({ gateway: hostPort(stack.url), sidecar: hostPort(sidecar.url) });
    wsBase = nginx.url.replace(/^http/, 'ws');
  });

  after(async () => {
    await nginx?.close();
    await stack?.close();
  });

  /** The upstream simulator's recording of a session, once its socket has closed. */
  async function recorded(match: (s: (typeof stack.upstream.realtime.sessions)[number]) => boolean) {
    const session = stack.upstream.realtime.sessions.findLast(match);
    assert.ok(session, 'the simulator recorded the session');
    await stack.upstream.waitFor(() => session.closed !== undefined);
    return session;
  }

  /** nginx's access-log entry of a request id (written when the session ended). */
  async function accessEntry(id: string): Promise<Record<string, unknown>> {
    const lines = (await nginx.accessLog()).trim().split('\n');
    const entry = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((e) => e.request_id === id);
    assert.ok(entry, `access log has ${id}`);
    return entry;
  }

  test('OpenAI Realtime: two responses, every frame unchanged both ways, one event per response', async () => {
    const correlation = 'rt-nginx-openai';
    upgrades.length = 0;
    const client = await RealtimeClient.open(`${wsBase}/v1/realtime?model=gpt-realtime`, {
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'x-router-request-id': correlation },
    });
    // nginx's own id is the session's request id (nginx is a trusted source); the client's becomes the
    // correlation id, as for HTTP requests.
    const rid = client.requestId;
    assert.match(rid, /^[0-9a-f]{32}$/);
    const [seen] = upgrades;
    assert.equal(upgrades.length, 1);
    assert.ok(seen);
    assert.equal(seen.url, '/v1/realtime?model=gpt-realtime');
    assert.equal(seen.httpVersion, '1.1');
    assert.equal(seen.headers.upgrade, 'websocket');
    assert.equal(seen.headers.connection, 'upgrade');
    assert.equal(seen.headers['x-router-request-id'], rid);
    assert.equal(seen.headers['x-router-correlation-id'], correlation);
    assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(seen.headers['x-forwarded-proto'], 'http');

    const created = await client.until((m) => m.type === 'session.created');
    const sent = await client.textConversation('hello through nginx');
    sent.push(client.send({ type: 'response.create' }));
    const first = await client.until((m) => m.type === 'response.done');
    await client.until((m) => m.type === 'rate_limits.updated');
    // A binary frame goes upstream as a binary frame: the simulator answers it with invalid_event.
    client.ws.send(Buffer.from('{}'), { binary: true });
    assert.equal((await client.until((m) => m.type === 'error')).error.code, 'invalid_event');
    sent.push(
      client.send({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'and once more' }] },
      }),
    );
    sent.push(client.send({ type: 'response.create' }));
    const second = await client.until((m) => m.type === 'response.done');
    await client.until((m) => m.type === 'rate_limits.updated');
    client.ws.close(1000, 'bye');
    assert.deepEqual(await client.closed, { code: 1000, reason: 'bye' });

    const upstream = await recorded((s) => s.id === created.session.id);
    // Frame for frame, byte for byte: what the simulator sent is what the client got, as text frames.
    assert.deepEqual(
      client.texts,
      upstream.sent.map((m) => JSON.stringify(m)),
    );
    assert.ok(client.binary.every((b) => !b));
    assert.deepEqual(
      upstream.received.map((m) => JSON.stringify(m)),
      [...sent.slice(0, 3), '{}', ...sent.slice(3)],
    );
    assert.equal(upstream.counts.responses, 2);
    assert.deepEqual(upstream.closed, { code: 1000, reason: 'bye', by: 'client' });
    // The gateway's credentials upstream, never the client's key.
    assert.equal(upstream.headers.authorization, 'Bearer sim-openai-key');
    assert.equal(upstream.path, '/v1/realtime?model=gpt-realtime');
    assert.ok(!JSON.stringify(upstream.headers).includes(ACCESS_KEY), 'the access key reached the upstream');

    assert.notEqual(first.response.id, second.response.id);
    for (const done of [first, second]) {
      const event = await stack.eventFor(`${rid}:${done.response.id}`);
      assert.equal(event.idempotency_key, `router:${rid}:${done.response.id}`);
      assert.equal(event.raw_json.api, 'realtime');
      assert.equal(event.raw_json.model, 'gpt-realtime');
      assert.equal(event.raw_json.meta.correlation_id, correlation);
      assert.equal(event.raw_json.usage.input_tokens, done.response.usage.input_tokens);
      assert.equal(event.raw_json.usage.output_tokens, done.response.usage.output_tokens);
    }
    assert.equal(
      stack.billing.events.filter((e) => e.external_event_id.startsWith(`${rid}:`)).length,
      2,
      'one event per response',
    );

    const entry = await accessEntry(rid);
    assert.equal(entry.path, '/v1/realtime');
    assert.equal(entry.status, 101);
  });

  test('Gemini Live: one turn, every frame unchanged, billed as turn-1; the ?key= stays out of the logs', async () => {
    upgrades.length = 0;
    const client = await RealtimeClient.open(`${wsBase}${GEMINI_PATH}?key=${ACCESS_KEY}`);
    const rid = client.requestId;
    assert.match(rid, /^[0-9a-f]{32}$/);
    assert.equal(upgrades[0]?.headers['x-router-request-id'], rid);
    const sent: string[] = [];
    sent.push(
      client.send({
        setup: { model: 'models/gemini-live-2.5-flash', generationConfig: { responseModalities: ['TEXT'] } },
      }),
    );
    await client.until((m) => m.setupComplete !== undefined);
    sent.push(
      client.send({
        clientContent: {
          turns: [{ role: 'user', parts: [{ text: 'hello gemini through nginx' }] }],
          turnComplete: true,
        },
      }),
    );
    const done = await client.until((m) => m.usageMetadata !== undefined);
    assert.equal(done.serverContent?.turnComplete, true);
    client.ws.close(1000, 'bye');
    assert.deepEqual(await client.closed, { code: 1000, reason: 'bye' });

    const upstream = await recorded((s) => s.provider === 'gemini');
    assert.deepEqual(
      client.texts,
      upstream.sent.map((m) => JSON.stringify(m)),
    );
    assert.ok(client.binary.every((b) => !b));
    assert.deepEqual(
      upstream.received.map((m) => JSON.stringify(m)),
      sent,
    );
    assert.equal(upstream.counts.responses, 1);
    assert.deepEqual(upstream.closed, { code: 1000, reason: 'bye', by: 'client' });
    assert.equal(upstream.model, 'gemini-live-2.5-flash');
    assert.equal(upstream.headers['x-goog-api-key'], 'sim-gemini-key');
    assert.ok(!upstream.path.includes(ACCESS_KEY), 'the access key is in the upstream query');
    assert.ok(!JSON.stringify(upstream.headers).includes(ACCESS_KEY), 'the access key reached the upstream');

    const event = await stack.eventFor(`${rid}:turn-1`);
    assert.equal(event.idempotency_key, `router:${rid}:turn-1`);
    assert.equal(event.raw_json.api, 'native.live');
    assert.equal(event.raw_json.model, 'gemini-live-2.5-flash');
    assert.equal(event.raw_json.usage.input_tokens, done.usageMetadata.promptTokenCount);
    assert.equal(event.raw_json.usage.output_tokens, done.usageMetadata.responseTokenCount);
    assert.equal(stack.billing.events.filter((e) => e.external_event_id.startsWith(`${rid}:`)).length, 1);

    const entry = await accessEntry(rid);
    assert.equal(entry.path, GEMINI_PATH);
    assert.equal(entry.status, 101);
    assert.ok(!(await nginx.accessLog()).includes(ACCESS_KEY), 'the access key is in the access log');
  });

  test('Gemini Live binary frames (as Google sends them): relayed as binary frames, unchanged, the turn billed', async () => {
    // The simulator sends binary frames for a model named `...-binary`; the header routes the unlisted model.
    const client = await RealtimeClient.open(`${wsBase}${GEMINI_PATH}`, {
      headers: { 'x-goog-api-key': ACCESS_KEY, 'x-router-provider': 'gemini' },
    });
    client.send({
      setup: { model: 'models/gemini-live-binary', generationConfig: { responseModalities: ['TEXT'] } },
    });
    await client.until((m) => m.setupComplete !== undefined);
    client.send({
      clientContent: { turns: [{ role: 'user', parts: [{ text: 'binary please' }] }], turnComplete: true },
    });
    const done = await client.until((m) => m.usageMetadata !== undefined);
    client.ws.close(1000);
    await client.closed;
    const upstream = await recorded((s) => s.model === 'gemini-live-binary');
    assert.ok(client.binary.length > 2 && client.binary.every((b) => b), 'every frame binary');
    assert.deepEqual(
      client.texts,
      upstream.sent.map((m) => JSON.stringify(m)),
    );
    // The usage message came in a binary frame: it is metered all the same.
    const event = await stack.eventFor(`${client.requestId}:turn-1`, 5000).catch(() => undefined);
    assert.ok(event, 'the turn whose usageMetadata came in a binary frame was billed');
    assert.equal(event.raw_json.usage.output_tokens, done.usageMetadata.responseTokenCount);
  });

  test('the browser subprotocol key passes through nginx and goes no further', async () => {
    const client = await RealtimeClient.open(`${wsBase}/v1/realtime?model=gpt-realtime`, {}, [
      'realtime',
      `openai-insecure-api-key.${ACCESS_KEY}`,
    ]);
    assert.equal(client.ws.protocol, 'realtime');
    const created = await client.until((m) => m.type === 'session.created');
    client.ws.close(1000);
    await client.closed;
    const upstream = await recorded((s) => s.id === created.session.id);
    assert.equal(upstream.protocol, 'realtime');
    assert.ok(!JSON.stringify(upstream.headers).includes(ACCESS_KEY), 'the access key reached the upstream');
    await accessEntry(client.requestId);
    assert.ok(!(await nginx.accessLog()).includes(ACCESS_KEY), 'the access key is in the access log');
  });

  test('a refused upgrade is the gateway answer (401, OpenAI error shape) passed on by nginx', async () => {
    const before = stack.upstream.realtime.sessions.length;
    await assert.rejects(
      RealtimeClient.open(`${wsBase}/v1/realtime?model=gpt-realtime`, {
        headers: { authorization: 'Bearer nope' },
      }),
      (err: { status?: number; body?: string; headers?: IncomingHttpHeaders }) => {
        assert.equal(err.status, 401);
        assert.equal(JSON.parse(err.body ?? '{}').error?.code, 'invalid_api_key');
        assert.match(String(err.headers?.['x-router-request-id']), /^[0-9a-f]{32}$/);
        return true;
      },
    );
    assert.equal(stack.upstream.realtime.sessions.length, before, 'nothing reached the upstream');
  });

  test('outside the realtime paths nginx forwards no upgrade: the request is served as plain HTTP', async () => {
    upgrades.length = 0;
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const req = httpRequest(`${nginx.url}/v1/models`, {
        headers: {
          authorization: `Bearer ${ACCESS_KEY}`,
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-version': '13',
          'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        },
      });
      req.once('response', resolve);
      req.once('upgrade', () => reject(new Error('upgraded')));
      req.once('error', reject);
      req.end();
    });
    let body = '';
    for await (const chunk of res) body += String(chunk);
    assert.equal(res.statusCode, 200);
    assert.ok(Array.isArray((JSON.parse(body) as { data?: unknown }).data));
    assert.equal(upgrades.length, 0, 'the gateway saw an upgrade');
  });
});

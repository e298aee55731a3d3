import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { BillingRequestError, createBillingClient } from '../../billing/billing-client.ts';
import type { UsageEvent } from '../../billing/event/usage-event.ts';

const EVENT: UsageEvent = {
  source: 'router',
  external_event_id: 'rid-1',
  idempotency_key: 'router:rid-1',
  occurred_at: 1760000000,
  subject_type: 'api_key',
  subject_id: 'client-a',
  raw_json: {
    provider: 'openai',
    api: 'chat.completions',
    model: 'gpt-4o-mini',
    stream: false,
    status: 200,
    usage_stage: 'upstream',
    usage: { input_tokens: 12, output_tokens: 5, total_tokens: 17 },
    meta: { subject_type: 'api_key', subject_id: 'client-a', request_id: 'rid-1' },
  },
};

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

type Reply = (req: IncomingMessage, res: ServerResponse) => void;

async function server(t: { after: (fn: () => Promise<void>) => void }, reply: Reply) {
  const seen: Seen[] = [];
  const srv = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => {
      body += d.toString();
    });
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      reply(req, res);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.after(async () => {
    srv.closeAllConnections();
    await new Promise<void>((r) => srv.close(() => r()));
  });
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, seen };
}

function client(baseUrl: string, requestTimeoutMs = 2000) {
  return createBillingClient({
    baseUrl,
    projectId: 'proj 1',
    apiKey: 'sk-secret',
    extractorRuleSetId: 'rs_router',
    requestTimeoutMs,
    balanceEnforcement: { requestTimeoutMs: 300 },
  });
}

function json(res: ServerResponse, status: number, body: unknown, type = 'application/json'): void {
  res.writeHead(status, { 'content-type': type });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

test('ingest: path, bearer, idempotency key and JSON body; 202 is ok', async (t) => {
  const s = await server(t, (_req, res) => json(res, 202, { accepted: true }));
  const c = client(`${s.url}/api/`);
  t.after(() => c.close());
  assert.deepEqual(await c.ingest(EVENT), { kind: 'ok', status: 202 });
  const [seen] = s.seen;
  assert.ok(seen);
  assert.equal(seen.method, 'POST');
  assert.equal(seen.url, '/api/v1/projects/proj%201/extractor-rule-sets/rs_router/events/ingest');
  assert.equal(seen.headers.authorization, 'Bearer sk-secret');
  assert.equal(seen.headers['idempotency-key'], 'router:rid-1');
  assert.equal(seen.headers['content-type'], 'application/json');
  assert.deepEqual(JSON.parse(seen.body), EVENT);
});

test('ingest classifies failures', async (t) => {
  let next: Reply = () => {};
  const s = await server(t, (req, res) => next(req, res));
  const c = client(s.url);
  t.after(() => c.close());
  const cases: [Reply, Record<string, unknown>][] = [
    [
      (_q, r) => json(r, 500, { error: { message: 'internal' } }),
      { kind: 'retryable', code: 'http_500', unavailable: false },
    ],
    [
      (_q, r) => json(r, 503, 'busy', 'text/plain'),
      { kind: 'retryable', code: 'http_503', unavailable: true },
    ],
    [(_q, r) => json(r, 429, {}), { kind: 'retryable', code: 'http_429', unavailable: true }],
    [(_q, r) => json(r, 408, {}), { kind: 'retryable', code: 'http_408', unavailable: true }],
    [
      (_q, r) =>
        json(r, 409, { error: { code: 'conflict', message: 'extractor rule set is not published' } }),
      { kind: 'permanent', code: 'rule_set_not_published', message: 'extractor rule set is not published' },
    ],
    [
      (_q, r) => json(r, 400, { message: 'bad event' }),
      { kind: 'permanent', code: 'http_400', message: 'bad event' },
    ],
    [
      (_q, r) =>
        json(r, 404, '<!DOCTYPE html><html><body>Not found</body></html>', 'text/html; charset=utf-8'),
      { kind: 'permanent', code: 'portal_html_404', hint: /API host, not the portal/ },
    ],
  ];
  for (const [reply, expected] of cases) {
    next = reply;
    const result = (await c.ingest(EVENT)) as unknown as Record<string, unknown>;
    for (const [key, value] of Object.entries(expected)) {
      if (value instanceof RegExp) assert.match(String(result[key]), value);
      else assert.equal(result[key], value, `${key} of ${JSON.stringify(result)}`);
    }
  }
});

test('ingest: request_timeout_ms bounds a hanging call; network errors are retryable', async (t) => {
  const s = await server(t, () => {}); // never answers
  const c = client(s.url, 100);
  t.after(() => c.close());
  const result = await c.ingest(EVENT);
  assert.equal(result.kind, 'retryable');
  assert.equal(result.kind === 'retryable' && result.code, 'timeout');

  const refused = client('http://127.0.0.1:1');
  t.after(() => refused.close());
  const r2 = await refused.ingest(EVENT);
  assert.equal(r2.kind === 'retryable' && r2.code, 'network_error');
  assert.equal(r2.kind === 'retryable' && r2.unavailable, true);
  assert.doesNotMatch(JSON.stringify(r2), /sk-secret/);
});

test('ingest: the caller can abort', async (t) => {
  const s = await server(t, () => {});
  const c = client(s.url);
  t.after(() => c.close());
  const ac = new AbortController();
  const pending = c.ingest(EVENT, ac.signal);
  ac.abort();
  const result = await pending;
  assert.equal(result.kind === 'retryable' && result.code, 'aborted');
});

test('getBalance: query, exact decimal string, timeout and errors', async (t) => {
  let mode: 'ok' | 'hang' | 'missing' | 'bad' = 'ok';
  const s = await server(t, (_req, res) => {
    if (mode === 'ok')
      json(res, 200, { account_id: 'acct_1', currency: 'USD', balance: '0.000000000000000001' });
    else if (mode === 'missing') json(res, 404, { error: { code: 'not_found', message: 'no wallet' } });
    else if (mode === 'bad') json(res, 200, { balance: 'lots' });
  });
  const c = client(s.url);
  t.after(() => c.close());
  assert.deepEqual(await c.getBalance('api_key', 'client a', 'USD'), {
    balance: '0.000000000000000001',
    currency: 'USD',
  });
  const [seen] = s.seen;
  assert.ok(seen);
  const url = new URL(seen.url, 'http://x');
  assert.equal(url.pathname, '/v1/projects/proj%201/wallets/realtime/amount');
  assert.deepEqual(Object.fromEntries(url.searchParams), {
    subject_type: 'api_key',
    subject_id: 'client a',
    currency: 'USD',
  });
  assert.equal(seen.headers.authorization, 'Bearer sk-secret');

  mode = 'missing';
  await assert.rejects(c.getBalance('api_key', 'x', 'USD'), (err: unknown) => {
    assert.ok(err instanceof BillingRequestError);
    assert.equal(err.code, 'http_404');
    return true;
  });
  mode = 'bad';
  await assert.rejects(c.getBalance('api_key', 'x', 'USD'), { code: 'invalid_response' });
  mode = 'hang';
  const started = Date.now();
  await assert.rejects(c.getBalance('api_key', 'x', 'USD'), { code: 'timeout' });
  assert.ok(Date.now() - started < 2000, 'balance timeout (300 ms), not the ingest timeout');
});

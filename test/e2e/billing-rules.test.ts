// Billing end to end: which requests are reported and to whom (only_billable_success, subjects,
// fallback_subject_id, models without a price), and what is never sent: no secret and no prompt text
// reaches the outbox files or the billing service.

import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { loadConfig } from '../../config/load.ts';
import { type Sidecar, startSidecar } from '../../sidecar/sidecar.ts';
import {
  BILLING_API_KEY,
  type BillingStack,
  outboxText,
  SUBJECT_ID,
  startBillingStack,
} from '../support/billing-stack.ts';
import { ACCESS_KEY, MASTER_KEY } from '../support/stack.ts';
import { outboxEventIds } from '../support/usage-events.ts';

async function send(
  stack: BillingStack,
  path: string,
  body: unknown,
  opts: { rid: string; key?: string; headers?: Record<string, string> },
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${stack.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${opts.key ?? ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': opts.rid,
      ...opts.headers,
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

async function metricValue(stack: BillingStack, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${stack.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

const chat = (model: string, content = 'Say hello.') => ({
  model,
  messages: [{ role: 'user', content }],
});

test('only_billable_success: true reports 2xx only; master key without fallback is counted, never sent', async (t) => {
  const stack = await startBillingStack({ billing: { only_billable_success: true } });
  t.after(() => stack.close());

  const bad = await send(stack, '/v1/chat/completions', chat('gpt-5.4-mini-fail-400'), { rid: 'rule-4xx' });
  assert.equal(bad.status, 400);
  const down = await send(stack, '/v1/chat/completions', chat('gpt-5.4-mini-fail-503'), { rid: 'rule-5xx' });
  assert.equal(down.status, 503);
  const master = await send(stack, '/v1/chat/completions', chat('gpt-5.4-mini'), {
    rid: 'rule-master',
    key: MASTER_KEY,
  });
  assert.equal(master.status, 200, 'a request without a subject is still served');
  // A later reportable request: once its event is accepted, the earlier ones had long been decided
  // (their decision is synchronous in the completion hook, right after their reply ended).
  const ok = await send(stack, '/v1/chat/completions', chat('gpt-5.4-mini'), { rid: 'rule-ok' });
  assert.equal(ok.status, 200);
  await stack.eventFor('rule-ok');
  await stack.sidecar?.worker?.waitForDrain();

  assert.deepEqual(
    stack.billing.events.map((e) => e.external_event_id),
    ['rule-ok'],
  );
  const outbox = await outboxText(stack.outboxDir);
  for (const rid of ['rule-4xx', 'rule-5xx', 'rule-master']) assert.doesNotMatch(outbox, new RegExp(rid));
  assert.equal(await metricValue(stack, 'router_billing_events_total', 'result="skip_status"'), 2);
  assert.equal(await metricValue(stack, 'router_billing_events_total', 'result="skip_no_subject"'), 1);
  assert.equal(await metricValue(stack, 'router_billing_events_total', 'result="queued"'), 1);
  const warned = stack.logs.filter((l) => l.msg.includes('maps to no billing subject'));
  assert.equal(warned.length, 1, 'the unattributable request is logged');
  assert.equal(warned[0]?.reqId, 'rule-master');
});

test('only_billable_success: false reports failed replies too (nothing charged); master key bills fallback_subject_id', async (t) => {
  const stack = await startBillingStack({
    billing: { only_billable_success: false, fallback_subject_id: 'house-account' },
    billingSim: { wallets: { [`api_key:${SUBJECT_ID}`]: '1000', 'api_key:house-account': '1000' } },
  });
  t.after(() => stack.close());

  const bad = await send(stack, '/v1/chat/completions', chat('gpt-5.4-mini-fail-400'), { rid: 'rule-4xx' });
  assert.equal(bad.status, 400);
  const event = await stack.eventFor('rule-4xx');
  assert.equal(event.raw_json.status, 400);
  assert.equal(event.raw_json.provider, 'openai');
  assert.equal(event.subject_id, SUBJECT_ID);
  assert.deepEqual(event.raw_json.usage, {
    input_tokens: 0,
    output_tokens: 0,
    total_tokens: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
  });
  assert.equal(event['x-billing'], undefined, 'no items: nothing to charge');
  assert.equal(stack.debited(), '0');

  const master = await send(stack, '/v1/chat/completions', chat('gpt-5.4-mini'), {
    rid: 'rule-master',
    key: MASTER_KEY,
  });
  assert.equal(master.status, 200);
  const billed = await stack.eventFor('rule-master');
  assert.equal(billed.subject_type, 'api_key');
  assert.equal(billed.subject_id, 'house-account');
  assert.deepEqual(billed.raw_json.meta, {
    subject_type: 'api_key',
    subject_id: 'house-account',
    request_id: 'rule-master',
    price_version: billed.raw_json.meta.price_version,
  });
  assert.match(billed.raw_json.meta.price_version ?? '', /^sha256:[0-9a-f]{16}$/);
  assert.notEqual(stack.debited('house-account'), '0', 'the fallback subject is charged');
  assert.equal(stack.debited(), '0', 'the key holder is not');
});

test('a model without a price is metered and reported without pricing_hints, marked unpriced, counted, warned about once', async (t) => {
  const stack = await startBillingStack();
  t.after(() => stack.close());
  // Routed by the registry's gpt-* pattern; pricing.yaml has no gpt-4* entry for openai.
  for (const rid of ['unpriced-1', 'unpriced-2']) {
    const res = await send(stack, '/v1/chat/completions', chat('gpt-4o-legacy'), { rid });
    assert.equal(res.status, 200);
    const event = await stack.eventFor(rid);
    assert.equal(event.raw_json.usage_stage, 'upstream');
    assert.ok(event.raw_json.usage.input_tokens > 0);
    const xb = event['x-billing'];
    assert.ok(xb, 'items are still sent');
    assert.deepEqual(
      xb.items.map((i) => i.metric),
      ['prompt_tokens', 'completion_tokens'],
    );
    assert.equal(xb.pricing_hints, undefined);
    assert.equal(event.raw_json.meta.unpriced, true, 'marked unpriced for the rule set');
    assert.match(event.raw_json.meta.price_version ?? '', /^sha256:[0-9a-f]{16}$/);
    assert.equal(xb.price_version, event.raw_json.meta.price_version);
  }
  assert.equal(stack.debited(), '0');
  const warnings = stack.logs.filter((l) => l.msg.startsWith('model has no price'));
  assert.equal(warnings.length, 1, 'warned once per model');
  assert.equal(warnings[0]?.model, 'gpt-4o-legacy');
  assert.equal(await metricValue(stack, 'router_unpriced_requests_total', 'provider="openai"'), 2);
});

// --- what is never sent ----------------------------------------------------------------------------

interface Received {
  headers: IncomingMessage['headers'];
  body: string;
}

/** A pass-through in front of the billing simulator that keeps every byte the gateway sent it. */
async function recordingProxy(
  target: string,
): Promise<{ url: string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    received.push({ headers: req.headers, body: body.toString('utf8') });
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (typeof v === 'string' && !['host', 'connection', 'content-length'].includes(k)) headers[k] = v;
    try {
      const upstream = await fetch(`${target}${req.url}`, {
        method: req.method,
        headers,
        body: req.method === 'GET' ? undefined : body,
      });
      res.writeHead(upstream.status, {
        'content-type': upstream.headers.get('content-type') ?? 'text/plain',
      });
      res.end(Buffer.from(await upstream.arrayBuffer()));
    } catch {
      res.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

test('no secret and no prompt text reaches the outbox or the billing service', async (t) => {
  const ACCESS = 'ak_accessKEYmarker_9d1e0c';
  const UPSTREAM = {
    openai: 'sk-upstreamOPENAImarker-1',
    anthropic: 'sk-upstreamANTHROPICmarker-2',
    gemini: 'upstreamGEMINImarker-3',
  };
  const PROMPT = 'quokkaPROMPTmarker zebraSYSTEMmarker';
  const stack = await startBillingStack({
    env: {
      ROUTER_ACCESS_KEY_CLIENT_A: ACCESS,
      ROUTER_PROVIDER_OPENAI_API_KEY: UPSTREAM.openai,
      ROUTER_PROVIDER_ANTHROPIC_API_KEY: UPSTREAM.anthropic,
      ROUTER_PROVIDER_GEMINI_API_KEY: UPSTREAM.gemini,
    },
    // The sidecar starts later, pointed at the recording proxy.
    sidecar: false,
  });
  const proxy = await recordingProxy(stack.billing.url);
  let sidecar: Sidecar | undefined;
  // One cleanup, in order: the sidecar before the proxy and the stack (which removes the outbox dir).
  t.after(async () => {
    await sidecar?.close();
    await proxy.close();
    await stack.close();
  });

  const messages = [
    { role: 'system', content: 'zebraSYSTEMmarker rules' },
    { role: 'user', content: `Please repeat quokkaPROMPTmarker now` },
  ];
  const calls: [string, unknown][] = [
    ['/v1/chat/completions', { model: 'gpt-5.4-mini', messages }],
    ['/v1/chat/completions', { model: 'gpt-5.4-mini', messages, stream: true }],
    ['/v1/chat/completions', { model: 'claude-sonnet-5', messages, stream: true }],
    ['/v1/chat/completions', { model: 'gemini-3.8-flash', messages }],
    [
      '/v1/messages',
      { model: 'claude-sonnet-5', max_tokens: 100, system: 'zebraSYSTEMmarker', messages: [messages[1]] },
    ],
    [
      '/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse',
      { contents: [{ role: 'user', parts: [{ text: 'Please repeat quokkaPROMPTmarker now' }] }] },
    ],
    ['/v1/embeddings', { model: 'text-embedding-3-small', input: 'quokkaPROMPTmarker' }],
  ];
  let n = 0;
  for (const [path, body] of calls) {
    const res = await send(stack, path, body, { rid: `secret-${++n}`, key: ACCESS });
    assert.equal(res.status, 200, res.text);
  }
  // The upstream echoes the prompt: the reply text is as private as the prompt.
  assert.ok(stack.upstream.requests.some((r) => r.body.toString('utf8').includes('quokkaPROMPTmarker')));

  // Everything is in the outbox before the sidecar starts: check the files as written by the gateway.
  const beforeDelivery = await outboxText(stack.outboxDir);
  assert.equal(outboxEventIds(beforeDelivery).length, calls.length);

  const loaded = await loadConfig(stack.configFile, { env: stack.env });
  assert.ok(loaded.config);
  sidecar = await startSidecar(
    { kind: 'billing-only', billing: { ...loaded.config.billing, baseUrl: proxy.url } },
    { listen: { host: '127.0.0.1', port: 0 } },
  );
  await stack.billing.waitForEvents(calls.length, 10_000);
  await sidecar.worker?.waitForDrain();

  const afterDelivery = await outboxText(stack.outboxDir);
  const sentBodies = proxy.received.map((r) => r.body).join('\n');
  const sentHeaders = proxy.received
    .map((r) =>
      Object.entries(r.headers)
        .filter(([k]) => k !== 'authorization')
        .map(([k, v]) => `${k}: ${String(v)}`)
        .join('\n'),
    )
    .join('\n');
  assert.equal(proxy.received.length >= calls.length, true);
  for (const r of proxy.received) assert.equal(r.headers.authorization, `Bearer ${BILLING_API_KEY}`);
  const forbidden = [
    ACCESS,
    ...Object.values(UPSTREAM),
    MASTER_KEY,
    BILLING_API_KEY,
    ...PROMPT.split(' '),
    'Echo:',
  ];
  const places: [string, string][] = [
    ['outbox (before delivery)', beforeDelivery],
    ['outbox (after delivery)', afterDelivery],
    ['bodies sent to billing', sentBodies],
    ['headers sent to billing (but Authorization)', sentHeaders],
    ['events accepted by billing', JSON.stringify(stack.billing.events)],
    ['gateway and sidecar logs', JSON.stringify(stack.logs)],
  ];
  for (const [where, text] of places) {
    assert.ok(text.length > 0, `${where} is not empty`);
    for (const secret of forbidden)
      assert.ok(!text.includes(secret), `${where} must not contain ${secret.slice(0, 6)}...`);
  }
});

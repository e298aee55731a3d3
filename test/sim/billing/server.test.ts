import assert from 'node:assert/strict';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Decimal } from 'decimal.js';
import type { UsageEvent } from '../../../billing/event/usage-event.ts';
import {
  type BillingSim,
  type BillingSimOptions,
  signWebhook,
  startBillingSim,
} from '../../../sim/billing/server.ts';

const API_KEY = 'sim-test-key';
const SECRET = 'whsec_test';
const PROJECT = 'proj_test';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver that records requests and answers the queued statuses (then 204). */
async function startReceiver(): Promise<{
  url: string;
  received: Received[];
  replies: number[];
  server: Server;
}> {
  const received: Received[] = [];
  const replies: number[] = [];
  const server = createServer(function receive(req, res) {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(replies.shift() ?? 204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/webhooks/billing`, received, replies, server };
}

/** The receiving side's check, written from docs/billing.md "Webhooks" (not using the simulator's signer). */
function verifySignature(secret: string, headers: IncomingHttpHeaders, rawBody: string): boolean {
  const timestamp = headers['x-billing-webhook-timestamp'];
  const signature = headers['x-billing-webhook-signature'];
  if (typeof timestamp !== 'string' || typeof signature !== 'string') return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest('hex'));
  return signature.split(',').some(function matches(part) {
    const value = part.trim();
    if (!value.startsWith('v1=')) return false;
    const given = Buffer.from(value.slice(3));
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
}

let counter = 0;
function usageEvent(
  overrides: Partial<UsageEvent> = {},
  price = { unitPrice: 0.1, pricingUnit: 1, quantity: 1 },
) {
  counter += 1;
  const rid = `req-${counter}`;
  return {
    source: 'router',
    external_event_id: rid,
    idempotency_key: `router:${rid}`,
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
      usage: { input_tokens: price.quantity, output_tokens: 0, total_tokens: price.quantity },
      meta: { subject_type: 'api_key', subject_id: 'client-a', request_id: rid },
    },
    'x-billing': {
      items: [{ metric: 'prompt_tokens', quantity: price.quantity, unit: 'token' }],
      pricing_hints: {
        prompt_tokens: { unit_price: price.unitPrice, pricing_unit: price.pricingUnit, currency: 'USD' },
      },
    },
    ...overrides,
  } satisfies UsageEvent;
}

function ingestUrl(sim: BillingSim, ruleSet = 'rs_router', project = PROJECT): string {
  return `${sim.url}/v1/projects/${project}/extractor-rule-sets/${ruleSet}/events/ingest`;
}

function ingest(
  sim: BillingSim,
  event: unknown,
  init: { ruleSet?: string; project?: string; key?: string; signal?: AbortSignal; base?: string } = {},
): Promise<Response> {
  const idempotencyKey =
    typeof event === 'object' && event !== null && 'idempotency_key' in event
      ? String(event.idempotency_key)
      : '';
  const url = init.base
    ? `${init.base}/v1/projects/${PROJECT}/extractor-rule-sets/rs_router/events/ingest`
    : ingestUrl(sim, init.ruleSet, init.project);
  return fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${init.key ?? API_KEY}`,
      'content-type': 'application/json',
      'idempotency-key': idempotencyKey,
    },
    body: typeof event === 'string' ? event : JSON.stringify(event),
    signal: init.signal,
  });
}

function get(sim: BillingSim, path: string): Promise<Response> {
  return fetch(`${sim.url}/v1/projects/${PROJECT}${path}`, {
    headers: { authorization: `Bearer ${API_KEY}` },
  });
}

function post(sim: BillingSim, path: string, body: unknown): Promise<Response> {
  return fetch(`${sim.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

async function withSim(
  options: Partial<BillingSimOptions>,
  run: (sim: BillingSim) => Promise<void>,
): Promise<void> {
  const sim = await startBillingSim({
    apiKey: API_KEY,
    projectId: PROJECT,
    ruleSets: { rs_router: 'published', rs_draft: 'draft' },
    ...options,
  });
  try {
    await run(sim);
  } finally {
    await sim.close();
  }
}

describe('ingest', () => {
  let sim: BillingSim;
  before(async () => {
    sim = await startBillingSim({
      apiKey: API_KEY,
      projectId: PROJECT,
      ruleSets: { rs_router: 'published', rs_draft: 'draft' },
      wallets: { 'api_key:client-a': '100' },
    });
  });
  after(() => sim.close());

  test('is idempotent on idempotency_key: a duplicate answers 202 and is charged once', async () => {
    sim.reset();
    const event = usageEvent();
    const first = await ingest(sim, event);
    assert.equal(first.status, 202);
    assert.equal(((await first.json()) as { accepted: boolean }).accepted, true);
    const second = await ingest(sim, event);
    assert.equal(second.status, 202);
    assert.deepEqual(await second.json(), {
      accepted: true,
      duplicate: true,
      idempotency_key: event.idempotency_key,
    });
    assert.equal(sim.ingestCalls, 2);
    assert.equal(sim.duplicates, 1);
    assert.equal(sim.accepted, 1);
    assert.equal(sim.events.length, 1);
    assert.equal(sim.events[0]!.external_event_id, event.external_event_id);
    assert.equal(sim.balance('api_key', 'client-a'), '99.9');
  });

  test('a draft rule set is refused with the real error text', async () => {
    const res = await ingest(sim, usageEvent(), { ruleSet: 'rs_draft' });
    assert.ok(res.status >= 400 && res.status < 500, `status ${res.status}`);
    const body = (await res.json()) as { error: { message: string } };
    assert.equal(body.error.message, 'extractor rule set is not published');
  });

  test('an unknown project or rule set answers 404 JSON', async () => {
    for (const init of [{ ruleSet: 'rs_nope' }, { project: 'proj_nope' }]) {
      const res = await ingest(sim, usageEvent(), init);
      assert.equal(res.status, 404);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      await res.json();
    }
  });

  test('a wrong or missing API key answers 401 JSON', async () => {
    const before = sim.accepted;
    const res = await ingest(sim, usageEvent(), { key: 'wrong' });
    assert.equal(res.status, 401);
    assert.ok(((await res.json()) as { error: unknown }).error);
    const bare = await fetch(ingestUrl(sim), { method: 'POST', body: JSON.stringify(usageEvent()) });
    assert.equal(bare.status, 401);
    await bare.body?.cancel();
    const lookup = await fetch(
      `${sim.url}/v1/projects/${PROJECT}/wallets/realtime/amount?subject_type=a&subject_id=b`,
    );
    assert.equal(lookup.status, 401);
    await lookup.body?.cancel();
    assert.equal(sim.accepted, before);
  });

  test('malformed JSON and missing or wrong required fields answer 400', async () => {
    const before = sim.accepted;
    const bad: unknown[] = [
      '{"source":',
      usageEvent({ subject_id: '' }),
      usageEvent({ occurred_at: 1760000000.5 }),
      usageEvent({ occurred_at: 1760000000000 }),
      { ...usageEvent(), raw_json: undefined },
      { ...usageEvent(), idempotency_key: undefined },
      { ...usageEvent(), 'x-billing': { items: [{ metric: 'prompt_tokens', quantity: -1, unit: 'token' }] } },
    ];
    for (const body of bad) {
      const res = await ingest(sim, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.ok(((await res.json()) as { error: { message: string } }).error.message);
    }
    assert.equal(sim.accepted, before);
  });

  test('an Idempotency-Key header that differs from the body is refused', async () => {
    const res = await fetch(ingestUrl(sim), {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'idempotency-key': 'router:other' },
      body: JSON.stringify(usageEvent()),
    });
    assert.equal(res.status, 400);
    await res.body?.cancel();
  });

  test('the portal address answers an HTML 404 page to ingest', async () => {
    const res = await ingest(sim, usageEvent(), { base: sim.portalUrl });
    assert.equal(res.status, 404);
    assert.match(res.headers.get('content-type') ?? '', /text\/html/);
    assert.match(await res.text(), /<html/i);
  });

  test('usage details list the latest accepted events, newest first', async () => {
    sim.reset();
    const events = [usageEvent(), usageEvent(), usageEvent()];
    for (const event of events) assert.equal((await ingest(sim, event)).status, 202);
    const res = await get(sim, '/usage/events/details?limit=2');
    assert.equal(res.status, 200);
    const body = (await res.json()) as {
      data: Array<{ external_event_id: string; amounts: Record<string, string> }>;
      total: number;
    };
    assert.deepEqual(
      body.data.map((row) => row.external_event_id),
      [events[2]!.external_event_id, events[1]!.external_event_id],
    );
    assert.deepEqual(body.data[0]!.amounts, { USD: '0.1' });
    assert.equal(body.total, 3);
  });

  test('a metric summary without a metric filter is refused with the real error text', async () => {
    const res = await get(
      sim,
      `/usage/summary?filter=${encodeURIComponent('provider=openai')}&group_by=metric`,
    );
    assert.equal(res.status, 400);
    const body = (await res.json()) as { error: { message: string } };
    assert.equal(
      body.error.message,
      'invalid usage query: metric or metrics is required for metric measures',
    );
  });

  test('a metric summary sums quantities and amounts of the exact model only', async () => {
    sim.reset();
    const price = { unitPrice: 0.15, pricingUnit: 1_000_000, quantity: 12 };
    await ingest(sim, usageEvent({}, price));
    await ingest(sim, usageEvent({}, price));
    const other = usageEvent({}, price);
    other.raw_json.model = 'gpt-4o-mini-2024-07-18';
    await ingest(sim, other);
    const filter = encodeURIComponent('metric=prompt_tokens; provider=openai; model=gpt-4o-mini');
    const res = await get(sim, `/usage/summary?filter=${filter}&group_by=metric`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { data: unknown[] };
    assert.deepEqual(body.data, [
      { metric: 'prompt_tokens', quantity: 24, amount: '0.0000036', currency: 'USD', events: 2 },
    ]);
  });
});

test('a spec rule set (ruleSetMode spec) charges prompt_tokens and completion_tokens only', async () => {
  const event = usageEvent();
  event['x-billing'] = {
    items: [
      { metric: 'prompt_tokens', quantity: 10, unit: 'token' },
      { metric: 'completion_tokens', quantity: 4, unit: 'token' },
      { metric: 'cache_read_tokens', quantity: 100, unit: 'token' },
      { metric: 'input_audio_tokens', quantity: 7, unit: 'token' },
    ],
    pricing_hints: {
      prompt_tokens: { unit_price: 0.01, pricing_unit: 1, currency: 'USD' },
      completion_tokens: { unit_price: 0.02, pricing_unit: 1, currency: 'USD' },
      cache_read_tokens: { unit_price: 0.001, pricing_unit: 1, currency: 'USD' },
      input_audio_tokens: { unit_price: 1, pricing_unit: 1, currency: 'USD' },
    },
  };
  for (const [ruleSetMode, debit] of [
    ['spec', '0.18'],
    ['items', '7.28'],
  ] as const) {
    await withSim({ ruleSetMode, wallets: { 'api_key:client-a': '100' } }, async (sim) => {
      assert.equal((await ingest(sim, event)).status, 202);
      assert.equal(sim.balance('api_key', 'client-a'), new Decimal(100).minus(debit).toFixed(), ruleSetMode);
      const details = (await (await get(sim, '/usage/events/details')).json()) as {
        data: { amounts: Record<string, string> }[];
      };
      assert.deepEqual(details.data[0]?.amounts, { USD: debit });
      const filter = encodeURIComponent('metrics=prompt_tokens,cache_read_tokens');
      const summary = (await (await get(sim, `/usage/summary?filter=${filter}&group_by=metric`)).json()) as {
        data: { metric: string; amount: string }[];
      };
      assert.deepEqual(
        summary.data.map((r) => [r.metric, r.amount]),
        [
          ['prompt_tokens', '0.1'],
          ['cache_read_tokens', ruleSetMode === 'spec' ? '0' : '0.1'],
        ],
      );
    });
  }
});

describe('wallets and webhooks', () => {
  test('exact decimal debits: 3 x 0.1 against 0.3 reach exactly 0 and fire insufficient_balance once', async () => {
    const receiver = await startReceiver();
    try {
      await withSim(
        { wallets: { 'api_key:client-a': '0.3' }, webhook: { url: receiver.url, secret: SECRET } },
        async (sim) => {
          for (let i = 0; i < 3; i += 1) assert.equal((await ingest(sim, usageEvent())).status, 202);
          assert.equal(sim.balance('api_key', 'client-a'), '0');
          // Below zero: no second webhook, the balance was already not positive.
          assert.equal((await ingest(sim, usageEvent())).status, 202);
          assert.equal(sim.balance('api_key', 'client-a'), '-0.1');
          const [delivery] = await sim.waitForWebhooks(1, 5_000);
          assert.equal(sim.webhooksSent.length, 1);
          assert.equal(delivery!.type, 'wallet.insufficient_balance');
          assert.equal(delivery!.delivered, true);
          assert.equal(receiver.received.length, 1);
          const body = JSON.parse(receiver.received[0]!.body);
          assert.equal(body.type, 'wallet.insufficient_balance');
          assert.deepEqual(body.data.subject, { subject_type: 'api_key', subject_id: 'client-a' });
          assert.equal(body.data.balance, '0');
          assert.ok(verifySignature(SECRET, receiver.received[0]!.headers, receiver.received[0]!.body));
        },
      );
    } finally {
      receiver.server.close();
    }
  });

  test('a credit from zero fires a validly signed balance_changed', async () => {
    const receiver = await startReceiver();
    const now = 1_760_000_123_456;
    try {
      await withSim(
        {
          wallets: { 'api_key:client-a': '0' },
          webhook: { url: receiver.url, secret: SECRET },
          now: () => now,
        },
        async (sim) => {
          const res = await post(sim, `/v1/projects/${PROJECT}/wallets/credit`, {
            subject_type: 'api_key',
            subject_id: 'client-a',
            amount: '10.00',
            currency: 'USD',
          });
          assert.equal(res.status, 200);
          const credited = (await res.json()) as { balance: string; account_id: string };
          assert.equal(credited.balance, '10');
          assert.match(credited.account_id, /^acct_/);
          await sim.waitForWebhooks(1, 5_000);
          const { headers, body } = receiver.received[0]!;
          assert.equal(headers['x-billing-webhook-timestamp'], '1760000123');
          assert.ok(verifySignature(SECRET, headers, body));
          assert.equal(verifySignature('other-secret', headers, body), false);
          const parsed = JSON.parse(body);
          assert.equal(parsed.type, 'wallet.balance_changed');
          assert.equal(parsed.id, headers['x-billing-webhook-id']);
          assert.equal(parsed.created_at, 1760000123);
          assert.deepEqual(parsed.data, {
            subject: { subject_type: 'api_key', subject_id: 'client-a' },
            balance: '10',
            currency: 'USD',
          });
          // A credit on a positive balance changes nothing for blocking: no second webhook.
          assert.equal(sim.credit('api_key', 'client-a', '1.5'), '11.5');
          assert.equal(sim.webhooksSent.length, 1);
        },
      );
    } finally {
      receiver.server.close();
    }
  });

  test('failed webhook deliveries are retried and recorded with their statuses', async () => {
    const receiver = await startReceiver();
    receiver.replies.push(500, 503);
    try {
      await withSim(
        { webhook: { url: receiver.url, secret: SECRET }, webhookRetryDelayMs: 1 },
        async (sim) => {
          sim.credit('api_key', 'new-subject', '1');
          const [delivery] = await sim.waitForWebhooks(1, 5_000);
          assert.deepEqual(
            delivery!.attempts.map((a) => a.status),
            [500, 503, 204],
          );
          assert.equal(delivery!.delivered, true);
          assert.equal(receiver.received.length, 3);
          assert.equal(new Set(receiver.received.map((r) => r.headers['x-billing-webhook-id'])).size, 1);
        },
      );
    } finally {
      receiver.server.close();
    }
  });

  test('sendWebhook sends forged, stale and replayed webhooks on demand', async () => {
    const receiver = await startReceiver();
    try {
      await withSim({ webhook: { url: receiver.url, secret: SECRET } }, async (sim) => {
        const subject = { subject_type: 'api_key', subject_id: 'client-b' };
        const good = await sim.sendWebhook('usage_limit.exhausted', subject, { id: 'evt_fixed' });
        const forged = await sim.sendWebhook('wallet.balance_changed', subject, { secret: 'attacker' });
        const stale = await sim.sendWebhook('wallet.balance_changed', subject, { timestamp: 1000 });
        const replayed = await sim.replayWebhook(good);
        assert.equal(receiver.received.length, 4);
        const [r0, r1, r2, r3] = receiver.received;
        assert.ok(verifySignature(SECRET, r0!.headers, r0!.body));
        assert.equal(verifySignature(SECRET, r1!.headers, r1!.body), false);
        assert.equal(r2!.headers['x-billing-webhook-timestamp'], '1000');
        assert.ok(verifySignature(SECRET, r2!.headers, r2!.body));
        assert.equal(r3!.body, r0!.body);
        assert.equal(r3!.headers['x-billing-webhook-signature'], r0!.headers['x-billing-webhook-signature']);
        assert.equal(JSON.parse(r3!.body).id, 'evt_fixed');
        for (const delivery of [good, forged, stale, replayed]) assert.equal(delivery.status, 204);
        assert.equal(
          signWebhook(SECRET, 1000, r2!.body),
          r2!.headers['x-billing-webhook-signature'],
          'the exported signer matches the header',
        );
      });
    } finally {
      receiver.server.close();
    }
  });

  test('threshold crossings send threshold_crossed with the threshold', async () => {
    await withSim({ wallets: { 'api_key:client-a': '1' }, thresholds: ['0.5'] }, async (sim) => {
      for (let i = 0; i < 6; i += 1) await ingest(sim, usageEvent());
      const types = sim.webhooksSent.map((d) => d.type);
      assert.deepEqual(types, ['wallet.available_balance.threshold_crossed']);
      assert.equal(JSON.parse(sim.webhooksSent[0]!.body).data.threshold, '0.5');
      assert.equal(sim.balance('api_key', 'client-a'), '0.4');
    });
  });

  test('balance lookup answers a decimal string, 404 for an unknown subject, and counts lookups', async () => {
    await withSim({ wallets: { 'api_key:client-a': '0.01' } }, async (sim) => {
      const res = await get(
        sim,
        '/wallets/realtime/amount?subject_type=api_key&subject_id=client-a&currency=USD',
      );
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { account_id: 'acct_1', currency: 'USD', balance: '0.01' });
      const missing = await get(
        sim,
        '/wallets/realtime/amount?subject_type=api_key&subject_id=nobody&currency=USD',
      );
      assert.equal(missing.status, 404);
      await missing.json();
      assert.equal(sim.lookups, 2);
      assert.throws(() => sim.balance('api_key', 'nobody'));
    });
  });
});

describe('failure injection', () => {
  test('error500 fails ingest until cleared through /_sim/failure', async () => {
    await withSim({}, async (sim) => {
      const set = await post(sim, '/_sim/failure', { mode: 'error500' });
      assert.equal(set.status, 200);
      await set.body?.cancel();
      const event = usageEvent();
      const failed = await ingest(sim, event);
      assert.equal(failed.status, 500);
      await failed.body?.cancel();
      assert.equal(sim.accepted, 0);
      sim.setFailure('none');
      assert.equal((await ingest(sim, event)).status, 202);
      assert.equal(sim.accepted, 1);
      assert.equal(sim.ingestCalls, 2);
      const bad = await post(sim, '/_sim/failure', { mode: 'explode' });
      assert.equal(bad.status, 400);
      await bad.body?.cancel();
    });
  });

  test('error500-times:n fails n calls, then recovers', async () => {
    await withSim({}, async (sim) => {
      sim.setFailure('error500-times:2');
      const event = usageEvent();
      const statuses = [];
      for (let i = 0; i < 3; i += 1) {
        const res = await ingest(sim, event);
        statuses.push(res.status);
        await res.body?.cancel();
      }
      assert.deepEqual(statuses, [500, 500, 202]);
      assert.equal(sim.accepted, 1);
      assert.equal(sim.duplicates, 0);
    });
  });

  test('hang holds ingest until the client gives up; close still finishes', async () => {
    await withSim({}, async (sim) => {
      sim.setFailure('hang');
      await assert.rejects(ingest(sim, usageEvent(), { signal: AbortSignal.timeout(100) }), {
        name: 'TimeoutError',
      });
      assert.equal(sim.ingestCalls, 1);
      assert.equal(sim.accepted, 0);
      // A second hung request is still open when close() runs: close must not wait for it.
      ingest(sim, usageEvent()).catch(() => undefined);
    });
  });

  test('slow:<ms> answers late but accepts the event', async () => {
    await withSim({}, async (sim) => {
      sim.setFailure('slow:30');
      const started = performance.now();
      const res = await ingest(sim, usageEvent());
      assert.equal(res.status, 202);
      await res.body?.cancel();
      assert.ok(performance.now() - started >= 25);
      assert.equal(sim.accepted, 1);
    });
  });

  test('lookup-error and lookup-hang affect only the balance endpoint', async () => {
    await withSim({ wallets: { 'api_key:client-a': '1' } }, async (sim) => {
      const path = '/wallets/realtime/amount?subject_type=api_key&subject_id=client-a&currency=USD';
      sim.setFailure('lookup-error');
      const failed = await get(sim, path);
      assert.equal(failed.status, 500);
      await failed.body?.cancel();
      assert.equal((await ingest(sim, usageEvent())).status, 202);
      sim.setFailure('lookup-hang');
      await assert.rejects(
        fetch(`${sim.url}/v1/projects/${PROJECT}${path}`, {
          headers: { authorization: `Bearer ${API_KEY}` },
          signal: AbortSignal.timeout(100),
        }),
        { name: 'TimeoutError' },
      );
      assert.equal(sim.lookups, 2);
    });
  });

  test('reset clears events, counters and wallets back to their initial state', async () => {
    await withSim({ wallets: { 'api_key:client-a': '1' } }, async (sim) => {
      await ingest(sim, usageEvent());
      sim.setFailure('error500');
      const res = await post(sim, '/_sim/reset', {});
      assert.equal(res.status, 200);
      const state = (await res.json()) as { accepted: number; wallets: Array<{ balance: string }> };
      assert.equal(state.accepted, 0);
      assert.equal(state.wallets[0]!.balance, '1');
      assert.equal((await ingest(sim, usageEvent())).status, 202);
    });
  });
});

describe('waitForEvents', () => {
  test('resolves once n events arrive, without polling', async () => {
    await withSim({}, async (sim) => {
      const waiting = sim.waitForEvents(3, 5_000);
      let resolved = false;
      waiting.then(() => {
        resolved = true;
      });
      await Promise.all([ingest(sim, usageEvent()), ingest(sim, usageEvent())]);
      assert.equal(resolved, false);
      await ingest(sim, usageEvent());
      await waiting;
      assert.equal(sim.accepted, 3);
    });
  });

  test('rejects after the timeout with the progress so far', async () => {
    await withSim({}, async (sim) => {
      await ingest(sim, usageEvent());
      await assert.rejects(sim.waitForEvents(2, 20), /1 of 2 events/);
    });
  });

  test('keepEvents false counts events without keeping them', async () => {
    await withSim({ keepEvents: false }, async (sim) => {
      const event = usageEvent();
      await ingest(sim, event);
      await ingest(sim, event);
      await sim.waitForEvents(1, 1_000);
      assert.equal(sim.events.length, 0);
      assert.equal(sim.accepted, 1);
      assert.equal(sim.duplicates, 1);
    });
  });
});

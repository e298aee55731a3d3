import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import type { SubjectStateNotice } from '../../common/internal-notify.ts';
import type { StateStore, SubjectRef } from '../../common/store-types.ts';
import { createWebhookHandler, nextSubjectState, parseWebhookEvent } from '../../sidecar/webhook-handler.ts';
import { SIGNATURE_SCHEME, signWebhookBody } from '../../sidecar/webhook-signature.ts';
import { type BillingSim, startBillingSim } from '../../sim/billing/server.ts';
import { type FileStateStore, openFileStore } from '../../store/file-store.ts';

const SECRET = 'whsec_handler_test';
const SUBJECT = { subject_type: 'api_key', subject_id: 'client-a' };
const REF: SubjectRef = { type: 'api_key', id: 'client-a' };
const MAX_BODY = 4096;

interface Harness {
  url: string;
  sim: BillingSim;
  store: FileStateStore;
  notices: SubjectStateNotice[];
  /** When set, the notifier waits on it (to observe that the 2xx waits for the gateway). */
  gate: { wait?: Promise<void> };
  dir: string;
  reopen(): Promise<void>;
}

async function harness(
  t: { after: (fn: () => Promise<void>) => void },
  wrap: (s: StateStore) => StateStore = (s) => s,
): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'router-webhook-'));
  const sim = await startBillingSim({ apiKey: 'k', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET } });
  const h = {
    sim,
    dir,
    notices: [] as SubjectStateNotice[],
    gate: {} as { wait?: Promise<void> },
    store: await openFileStore({ dir, role: 'writer' }),
    url: '',
    reopen: async () => undefined,
  } satisfies Harness;
  let handler = build();
  function build() {
    return createWebhookHandler({
      config: { webhookSecret: SECRET, timestampToleranceS: 300, webhookMaxBodyBytes: MAX_BODY },
      store: wrap(h.store),
      async notify(n) {
        await h.gate.wait;
        h.notices.push(n);
        return true;
      },
    });
  }
  h.reopen = async () => {
    await h.store.close();
    h.store = await openFileStore({ dir, role: 'writer' });
    handler = build();
  };
  const server: Server = createServer((req, res) => {
    void handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  h.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/internal/billing/webhook`;
  t.after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await sim.close();
    await h.store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return h;
}

test('a signed insufficient_balance blocks the subject, and the 204 waits for the gateway notice', async (t) => {
  const h = await harness(t);
  let open: () => void = () => undefined;
  h.gate.wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  let settled = false;
  const pending = h.sim
    .sendWebhook('wallet.insufficient_balance', SUBJECT, { url: h.url, data: { balance: '-0.01' } })
    .then((d) => {
      settled = true;
      return d;
    });
  // The state is on disk before the gateway is told; the sender has no answer yet.
  while ((await h.store.getSubject(REF)) === undefined) await new Promise((r) => setImmediate(r));
  assert.equal(settled, false);
  open();
  const delivery = await pending;
  assert.equal(delivery.status, 204);
  assert.deepEqual(h.notices, [
    {
      subject_type: 'api_key',
      subject_id: 'client-a',
      event_id: delivery.id,
      event_type: 'wallet.insufficient_balance',
    },
  ]);
  const state = await h.store.getSubject(REF);
  assert.equal(state?.blocked, true);
  assert.equal(state?.lastEventId, delivery.id);
  assert.equal(state?.balance, '-0.01');
});

test('event kinds: balance_changed unblocks, threshold is recorded, usage_limit blocks, unknown changes nothing', async (t) => {
  const h = await harness(t);
  const send = (type: string) => h.sim.sendWebhook(type, SUBJECT, { url: h.url });
  assert.equal((await send('usage_limit.exhausted')).status, 204);
  assert.equal((await h.store.getSubject(REF))?.blocked, true);
  assert.equal((await send('wallet.available_balance.threshold_crossed')).status, 204);
  const recorded = await h.store.getSubject(REF);
  assert.equal(recorded?.blocked, true, 'recorded only: still blocked');
  assert.equal(typeof recorded?.thresholdCrossedAt, 'number');
  assert.equal((await send('wallet.balance_changed')).status, 204);
  const lifted = await h.store.getSubject(REF);
  assert.equal(lifted?.blocked, false);
  assert.equal(lifted?.thresholdCrossedAt, recorded?.thresholdCrossedAt);
  const unknown = await send('invoice.paid');
  assert.equal(unknown.status, 204);
  assert.deepEqual(await h.store.getSubject(REF), lifted);
  assert.equal(h.notices.length, 3, 'no notice for an event that changed nothing');
});

test('forged, stale, unsigned, oversized and malformed webhooks are refused and change nothing', async (t) => {
  const h = await harness(t);
  const first = await h.sim.sendWebhook('wallet.balance_changed', SUBJECT, { url: h.url });
  assert.equal(first.status, 204);
  const before = await h.store.getSubject(REF);
  const block = (opts: Parameters<BillingSim['sendWebhook']>[2]) =>
    h.sim.sendWebhook('wallet.insufficient_balance', SUBJECT, { url: h.url, ...opts });
  const now = Math.floor(Date.now() / 1000);

  assert.equal((await block({ secret: 'whsec_forged' })).status, 401, 'forged');
  assert.equal((await block({ timestamp: now - 301 })).status, 401, 'stale');
  assert.equal((await block({ timestamp: now + 301 })).status, 401, 'from the future');
  assert.equal((await block({ omitSignature: true })).status, 401, 'no signature');
  assert.equal((await block({ omitTimestamp: true })).status, 401, 'no timestamp');
  assert.equal((await block({ data: { pad: 'x'.repeat(MAX_BODY) } })).status, 413, 'oversized');
  assert.equal((await block({ rawBody: '{"id":"evt_bad",' })).status, 400, 'not JSON');
  assert.equal((await block({ rawBody: '[1,2]' })).status, 400, 'not an object');
  assert.equal((await block({ rawBody: '{"id":"evt_nt","data":{}}' })).status, 400, 'no type');
  const noSubject = '{"id":"evt_ns","type":"wallet.insufficient_balance","data":{}}';
  assert.equal((await block({ rawBody: noSubject })).status, 400, 'no subject');

  // No id anywhere (body nor X-Billing-Webhook-ID): 400.
  const ts = String(now);
  const body =
    '{"type":"wallet.insufficient_balance","data":{"subject_type":"api_key","subject_id":"client-a"}}';
  const res = await fetch(h.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-billing-webhook-timestamp': ts,
      'x-billing-webhook-signature': signWebhookBody(SECRET, ts, body),
    },
    body,
  });
  assert.equal(res.status, 400);
  const err = (await res.json()) as { error: { code: string } };
  assert.equal(err.error.code, 'malformed_webhook');

  assert.deepEqual(await h.store.getSubject(REF), before, 'subject state unchanged');
  assert.equal(h.notices.length, 1);
  // None of the refused ids was claimed: the legitimate event with the id of a refused one still applies.
  assert.equal((await block({ id: 'evt_bad' })).status, 204);
  assert.equal((await h.store.getSubject(REF))?.blocked, true);
});

test('a body-only signature is refused with 401, and the log line names the scheme expected, not the secret', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'router-webhook-scheme-'));
  const store = await openFileStore({ dir, role: 'writer' });
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'warn' }, { write: (l: string) => lines.push(JSON.parse(l)) });
  const handler = createWebhookHandler({
    config: { webhookSecret: SECRET, timestampToleranceS: 300, webhookMaxBodyBytes: MAX_BODY },
    store,
    log,
    notify: async () => true,
  });
  const server = createServer((req, res) => void handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const body = JSON.stringify({ id: 'evt_body_only', type: 'wallet.insufficient_balance', data: SUBJECT });
  const post = (signature: string) =>
    fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/internal/billing/webhook`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-billing-webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'x-billing-webhook-signature': signature,
      },
      body,
    });
  const res = await post(`v1=${createHmac('sha256', SECRET).update(body).digest('hex')}`);
  assert.equal(res.status, 401);
  assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'invalid_signature');
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.reason, 'body_only_signature');
  assert.equal(lines[0]!.expected, SIGNATURE_SCHEME);
  assert.match(String(lines[0]!.expected), /<X-Billing-Webhook-Timestamp>\.<raw body>/);
  assert.match(String(lines[0]!.msg), /signed over the body alone/);
  // A plain forgery says which scheme was expected too; no line carries the secret.
  assert.equal(
    (await post(signWebhookBody('whsec_forged', Math.floor(Date.now() / 1000), body))).status,
    401,
  );
  assert.equal(lines[1]!.reason, 'bad_signature');
  assert.equal(lines[1]!.expected, SIGNATURE_SCHEME);
  assert.ok(!JSON.stringify(lines).includes(SECRET));
  assert.equal(await store.getSubject(REF), undefined, 'nothing applied');
});

test('a replayed webhook answers 204 and changes nothing, also after a restart', async (t) => {
  const h = await harness(t);
  const blockDelivery = await h.sim.sendWebhook('wallet.insufficient_balance', SUBJECT, { url: h.url });
  assert.equal(blockDelivery.status, 204);
  assert.equal((await h.sim.sendWebhook('wallet.balance_changed', SUBJECT, { url: h.url })).status, 204);
  const unblocked = await h.store.getSubject(REF);
  assert.equal(unblocked?.blocked, false);

  const replay = await h.sim.replayWebhook(blockDelivery);
  assert.equal(replay.status, 204);
  assert.deepEqual(await h.store.getSubject(REF), unblocked);
  // Same id with a fresh timestamp and signature (a sender retry): still a duplicate.
  const retry = await h.sim.sendWebhook('wallet.insufficient_balance', SUBJECT, {
    url: h.url,
    id: blockDelivery.id,
  });
  assert.equal(retry.status, 204);
  assert.deepEqual(await h.store.getSubject(REF), unblocked);

  await h.reopen();
  assert.equal((await h.sim.replayWebhook(blockDelivery)).status, 204);
  assert.deepEqual(await h.store.getSubject(REF), unblocked, 'dedupe survived the restart');
  assert.equal(h.notices.length, 2);
});

test('a failed state change answers 500 and releases the id, so the retry applies', async (t) => {
  let failNext = true;
  const h = await harness(t, (s) => ({
    ...s,
    setSubject(r, st) {
      if (failNext) {
        failNext = false;
        return Promise.reject(new Error('disk full'));
      }
      return s.setSubject(r, st);
    },
  }));
  const first = await h.sim.sendWebhook('wallet.insufficient_balance', SUBJECT, {
    url: h.url,
    id: 'evt_retry',
  });
  assert.equal(first.status, 500);
  assert.equal(await h.store.getSubject(REF), undefined);
  assert.equal(h.notices.length, 0);
  const again = await h.sim.sendWebhook('wallet.insufficient_balance', SUBJECT, {
    url: h.url,
    id: 'evt_retry',
  });
  assert.equal(again.status, 204);
  assert.equal((await h.store.getSubject(REF))?.blocked, true);
});

test('event fields: id, type and subject fallbacks of the conventions', () => {
  const parse = (body: unknown, header?: string) =>
    parseWebhookEvent(Buffer.from(JSON.stringify(body)), header);
  assert.deepEqual(
    parse({
      event_id: 'e2',
      event_type: 'usage_limit.exhausted',
      data: { subject_type: 't', subject_id: 'i' },
    }),
    {
      ok: true,
      event: { id: 'e2', type: 'usage_limit.exhausted', subject: { type: 't', id: 'i' }, balance: undefined },
    },
  );
  const fromHeader = parse({ type: 'x' }, 'hdr_1');
  assert.equal(fromHeader.ok && fromHeader.event.id, 'hdr_1');
  const nested = parse({
    id: 'e',
    type: 'x',
    data: { subject: { subject_type: 'a', subject_id: 'b' }, balance: 3 },
  });
  assert.deepEqual(nested.ok && nested.event, {
    id: 'e',
    type: 'x',
    subject: { type: 'a', id: 'b' },
    balance: '3',
  });
  assert.equal(parse({ id: '', type: 'x' }).ok, false);
  assert.equal(
    nextSubjectState(undefined, { id: 'e', type: 'other', subject: undefined, balance: undefined }, 1),
    undefined,
  );
});

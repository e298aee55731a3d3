// `router-admin billing reconcile` end to end, in file mode and in shared-store mode (real redis-server):
// 1,000 mixed requests (plain and streamed replies, clients hanging up mid-stream, upstream 500s, 429s
// and mid-stream failures, requests the gateway refuses itself) through the gateway, the sidecar and the
// billing simulator, with a reconcile while they flow (no false difference). Then: served = billed in
// the gateway's metrics; reconcile finds no difference; with three events deleted from the simulator it
// names exactly those three and exits 1; --resend sends them again and a second reconcile is clean; an
// event the gateway never served is a phantom, one of another source unknown_source; a billing service
// that ignores `offset` is refused with a clear message.

import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { runAdmin } from '../../admin/cli.ts';
import {
  BILLING_API_KEY,
  BILLING_PROJECT,
  BILLING_RULE_SET,
  type BillingStack,
  startBillingStack,
  waitUntil,
} from '../support/billing-stack.ts';
import { startRedis } from '../support/redis.ts';
import { scrapeServedBilled } from '../support/served-billed.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const REQUESTS = 1000;
const CONCURRENCY = 32;

function capture(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString('utf8');
      done();
    },
  });
  return { stream, text: () => text };
}

async function reconcile(
  stack: BillingStack,
  extra: readonly string[],
): Promise<{ code: number; out: string; err: string }> {
  const out = capture();
  const err = capture();
  const code = await runAdmin(['billing', 'reconcile', '-c', stack.configFile, ...extra], {
    stdout: out.stream,
    stderr: err.stream,
  });
  return { code, out: out.text(), err: err.text() };
}

const HEADERS = {
  authorization: `Bearer ${ACCESS_KEY}`,
  'content-type': 'application/json',
  'x-router-provider': 'openai',
};

/** One request of the mix; resolves once the client is done with it (read, failed or hung up). */
async function one(url: string, i: number): Promise<void> {
  const kind = i % 10;
  const rid = `rec-${kind}-${i}`;
  const headers: Record<string, string> = { ...HEADERS, 'x-router-request-id': rid };
  const chat = (body: Record<string, unknown>) => ({
    model: 'gpt-5.4-mini',
    messages: [{ role: 'user', content: `request ${i}` }],
    ...body,
  });
  let body: string = JSON.stringify(chat({}));
  if (kind === 3) body = JSON.stringify(chat({ stream: true }));
  if (kind === 5) headers['x-sim-fail'] = '500';
  if (kind === 6) {
    headers['x-sim-fail'] = 'midstream';
    body = JSON.stringify(chat({ stream: true }));
  }
  if (kind === 7) headers['x-sim-fail'] = '429';
  if (kind === 8) body = '{"model": "gpt-5.4-mini", "messages": ['; // refused by the gateway: never served
  if (kind === 9) headers['x-sim-no-usage'] = '1';
  if (kind === 4) {
    // A client that hangs up after the first bytes of a long stream.
    const controller = new AbortController();
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify(chat({ model: 'gpt-5.4-mini-chunks-200-delay-5', stream: true })),
      signal: controller.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    controller.abort();
    await reader.read().catch(() => undefined);
    return;
  }
  const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers, body });
  await res.arrayBuffer().catch(() => undefined);
}

/** The mix; `midway` runs once half the requests are under way, while the rest keep coming. */
async function runMix(url: string, midway: () => Promise<void>): Promise<void> {
  let next = 0;
  let half: Promise<void> | undefined;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS) {
        if (next === REQUESTS / 2) half ??= midway();
        await one(url, next++);
      }
    }),
  );
  await half;
}

function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

interface Report {
  ledger_events: number;
  billing_events: number;
  missing: { request_id: string }[];
  duplicate: unknown[];
  phantom: { request_id: string }[];
  unknown_source: { request_id: string }[];
  pending: unknown[];
  resent?: { request_id: string; ok: boolean }[];
  differences: number;
}

async function reconcileRun(stack: BillingStack): Promise<void> {
  const since = rfc3339(Date.now() - 2000);
  // A reconcile while the traffic flows: events written or delivered while it reads are pending, never
  // a false missing or phantom.
  let live: { code: number; out: string; err: string } | undefined;
  await runMix(stack.url, async () => {
    live = await reconcile(stack, ['--since', since, '--json']);
  });
  assert.ok(live !== undefined);
  assert.equal(live.code, 0, live.err + live.out);
  const during = JSON.parse(live.out) as Report;
  assert.deepEqual([during.missing, during.duplicate, during.phantom], [[], [], []]);
  assert.ok(during.ledger_events > 0);

  // Every served request has its event on record (or is not reportable by rule), and the billing
  // simulator has every event on record: served = billed.
  await waitUntil(
    async () => {
      const sb = await scrapeServedBilled(stack.url);
      return sb.inFlight === 0 && sb.gap === 0 && stack.billing.accepted === sb.queued;
    },
    'served = billed, every event delivered',
    30_000,
  );
  const sb = await scrapeServedBilled(stack.url);
  assert.equal(sb.gap, 0, JSON.stringify(sb));
  assert.equal(sb.queueFailed, 0);
  assert.ok(sb.queued >= 800, `most requests were billable (${sb.queued})`);
  // The requests the gateway refused itself were never served; every other one has its event.
  assert.equal(sb.served, REQUESTS - REQUESTS / 10, JSON.stringify(sb));

  const clean = await reconcile(stack, ['--since', since, '--json']);
  assert.equal(clean.code, 0, clean.err + clean.out);
  const first = JSON.parse(clean.out) as Report;
  assert.equal(first.differences, 0);
  assert.equal(first.ledger_events, sb.queued);
  assert.equal(first.billing_events, sb.queued);
  for (const list of [first.missing, first.duplicate, first.phantom, first.unknown_source, first.pending])
    assert.deepEqual(list, []);

  // Three events lost by the billing service: named, exactly those, exit 1.
  const lost = [stack.billing.events[10]!, stack.billing.events[500]!, stack.billing.events[800]!].map(
    (e) => e.external_event_id,
  );
  const del = await fetch(`${stack.billing.url}/_sim/events/delete`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ request_ids: lost }),
  });
  assert.deepEqual(await del.json(), { deleted: 3 });
  const text = await reconcile(stack, ['--since', since]);
  assert.equal(text.code, 1, text.err);
  for (const id of lost) assert.match(text.out, new RegExp(`^  ${id} `, 'm'));
  assert.match(text.out, /^missing 3 /m);
  assert.match(text.out, /^3 differences$/m);
  const json = JSON.parse((await reconcile(stack, ['--since', since, '--json'])).out) as Report;
  assert.deepEqual(json.missing.map((d) => d.request_id).sort(), [...lost].sort());
  assert.deepEqual([json.duplicate, json.phantom, json.unknown_source, json.pending], [[], [], [], []]);

  // --resend sends those three again (same idempotency keys); a second run is clean.
  const resend = await reconcile(stack, ['--since', since, '--json', '--resend']);
  assert.equal(resend.code, 0, resend.err);
  const resent = JSON.parse(resend.out) as Report;
  assert.deepEqual(
    resent.resent?.map((r) => [r.request_id, r.ok]).sort(),
    [...lost].sort().map((id) => [id, true]),
  );
  const after = await reconcile(stack, ['--since', since, '--json']);
  assert.equal(after.code, 0, after.err);
  assert.equal((JSON.parse(after.out) as Report).differences, 0);

  // An event the gateway never served (its source, in the window): a phantom, exit 1. One of another
  // source: unknown_source, which alone is no difference.
  const template = stack.billing.events[0]!;
  const forged = (id: string, source: string) => ({
    ...template,
    source,
    external_event_id: id,
    idempotency_key: `router:${id}`,
    raw_json: { ...template.raw_json, meta: { ...template.raw_json.meta, request_id: id } },
  });
  for (const e of [forged('never-served', 'router'), forged('other-program', 'another-program')]) {
    const res = await fetch(
      `${stack.billing.url}/v1/projects/${BILLING_PROJECT}/extractor-rule-sets/${BILLING_RULE_SET}/events/ingest`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${BILLING_API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(e),
      },
    );
    assert.equal(res.status, 202, await res.text());
  }
  const ghost = await reconcile(stack, ['--since', since, '--json']);
  assert.equal(ghost.code, 1, ghost.err);
  const ghostReport = JSON.parse(ghost.out) as Report;
  assert.deepEqual(
    ghostReport.phantom.map((d) => d.request_id),
    ['never-served'],
  );
  assert.deepEqual(
    ghostReport.unknown_source.map((d) => d.request_id),
    ['other-program'],
  );
  assert.equal(ghostReport.differences, 1);
  stack.billing.deleteEvents(['never-served']);
  assert.equal((await reconcile(stack, ['--since', since])).code, 0, 'unknown_source alone exits 0');

  // A billing service that ignores `offset`: the window holds more than a page, so nothing is compared.
  stack.billing.setDetailsIgnoreOffset(true);
  const deaf = await reconcile(stack, ['--since', since, '--page-size', '100']);
  stack.billing.setDetailsIgnoreOffset(false);
  assert.equal(deaf.code, 1);
  assert.equal(deaf.out, '');
  assert.match(deaf.err, /ignores "offset", so only its newest 100 events can be read/);
  // No secret in anything the command printed.
  for (const r of [clean, text, resend, after, deaf])
    assert.doesNotMatch(r.out + r.err, /sk_billing_test_secret/);
}

test('file mode: 1,000 mixed requests reconcile clean; three lost events are named, resent, then clean', async (t) => {
  const stack = await startBillingStack();
  t.after(() => stack.close());
  await reconcileRun(stack);
});

test('shared-store mode: the same against the retained stream entries', async (t) => {
  const redis = await startRedis();
  const stack = await startBillingStack({
    extraYaml: [
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "reconcile${process.pid}:"`,
      '  access_key_mode: file_only',
      '  access_key_hash_secret: reconcile-test-hash-secret',
      '',
    ].join('\n'),
  });
  t.after(async () => {
    await stack.close();
    await redis.close();
  });
  await reconcileRun(stack);
});

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { test } from 'node:test';
import { signWebhookBody, verifyWebhookSignature } from '../../sidecar/webhook-signature.ts';
import { signWebhook } from '../../sim/billing/server.ts';

const SECRET = 'whsec_test_secret';
const NOW_MS = 1_760_000_000_000;
const TS = String(NOW_MS / 1000);
const BODY = Buffer.from('{"id":"evt_1","type":"wallet.insufficient_balance"}');

function check(over: Partial<Parameters<typeof verifyWebhookSignature>[0]> = {}) {
  return verifyWebhookSignature({
    secrets: [SECRET],
    signature: signWebhookBody(SECRET, TS, BODY),
    timestamp: TS,
    rawBody: BODY,
    toleranceS: 300,
    nowMs: NOW_MS,
    ...over,
  });
}

test('a good signature verifies, and it matches what the billing simulator sends', () => {
  assert.deepEqual(check(), { ok: true, timestamp: NOW_MS / 1000 });
  assert.equal(signWebhookBody(SECRET, TS, BODY), signWebhook(SECRET, Number(TS), BODY.toString()));
  // Upper-case hex is the same signature.
  const upper = `v1=${signWebhookBody(SECRET, TS, BODY).slice(3).toUpperCase()}`;
  assert.equal(check({ signature: upper }).ok, true);
});

test('forged: another secret, a changed body, a changed timestamp, a wrong scheme', () => {
  assert.deepEqual(check({ signature: signWebhookBody('other', TS, BODY) }), {
    ok: false,
    reason: 'bad_signature',
  });
  assert.equal(check({ rawBody: Buffer.from(`${BODY.toString()} `) }).ok, false);
  // The timestamp is signed: moving it (still within tolerance) breaks the signature.
  assert.deepEqual(check({ timestamp: String(Number(TS) + 1) }), { ok: false, reason: 'bad_signature' });
  assert.equal(check({ signature: signWebhookBody(SECRET, TS, BODY).replace('v1=', 'v0=') }).ok, false);
  assert.equal(check({ signature: 'v1=abc' }).ok, false);
});

test('a MAC of the body alone (no timestamp) is refused and named body_only_signature', () => {
  const bodyOnly = `v1=${createHmac('sha256', SECRET).update(BODY).digest('hex')}`;
  assert.deepEqual(check({ signature: bodyOnly }), { ok: false, reason: 'body_only_signature' });
  // Also among several values, and whatever the timestamp says.
  assert.deepEqual(check({ signature: `v1=${'0'.repeat(64)},${bodyOnly}`, timestamp: '1' }), {
    ok: false,
    reason: 'body_only_signature',
  });
  // A body-only MAC under another secret is just a bad signature.
  const foreign = `v1=${createHmac('sha256', 'other').update(BODY).digest('hex')}`;
  assert.deepEqual(check({ signature: foreign }), { ok: false, reason: 'bad_signature' });
});

test('stale timestamps are refused either way, at the tolerance edge accepted', () => {
  for (const skew of [301, -301, 86_400]) {
    const ts = String(Number(TS) + skew);
    assert.deepEqual(check({ timestamp: ts, signature: signWebhookBody(SECRET, ts, BODY) }), {
      ok: false,
      reason: 'stale_timestamp',
    });
  }
  for (const skew of [300, -300]) {
    const ts = String(Number(TS) + skew);
    assert.equal(check({ timestamp: ts, signature: signWebhookBody(SECRET, ts, BODY) }).ok, true);
  }
});

test('a comma-separated list (sender rotating its secret) passes when any value matches', () => {
  const old = signWebhookBody('whsec_old', TS, BODY);
  const good = signWebhookBody(SECRET, TS, BODY);
  assert.equal(check({ signature: `${old},${good}` }).ok, true);
  assert.equal(check({ signature: `${good}, ${old}` }).ok, true);
  assert.equal(check({ signature: `${old},v1=${'0'.repeat(64)}` }).ok, false);
  // Receiver side rotation: either of two configured secrets.
  assert.equal(check({ secrets: ['whsec_old', SECRET], signature: old }).ok, true);
});

test('missing headers, a malformed timestamp and no configured secret are refused', () => {
  assert.deepEqual(check({ signature: undefined }), { ok: false, reason: 'missing_signature' });
  assert.deepEqual(check({ signature: '' }), { ok: false, reason: 'missing_signature' });
  assert.deepEqual(check({ timestamp: undefined }), { ok: false, reason: 'missing_timestamp' });
  assert.deepEqual(check({ timestamp: '17e8' }), { ok: false, reason: 'bad_timestamp' });
  assert.deepEqual(check({ secrets: [''] }), { ok: false, reason: 'no_secret' });
  assert.deepEqual(check({ secrets: [] }), { ok: false, reason: 'no_secret' });
});

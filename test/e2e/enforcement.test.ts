// Balance enforcement end to end (docs/billing.md "Balance enforcement"): gateway + sidecar + billing simulator + upstream
// simulator in file mode. A subject spends its wallet down with real chat requests; the simulator's
// insufficient_balance webhook reaches the gateway's port; the very next request is 402 with the exact
// documented body. A credit sends balance_changed and the subject is served again. Forged, stale, replayed,
// oversized and malformed webhooks are refused and change nothing. Lookup outages in both modes, and a
// burst of 200 requests making one lookup.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Decimal } from 'decimal.js';
import { GATEWAY_URL_ENV } from '../../common/internal-notify.ts';
import { SUBJECTS_FILE } from '../../store/file-store.ts';
import { type ChildGateway, spawnLogged } from '../support/billing-stack.ts';
import {
  ACCESS_KEY_B,
  type EnforcementStack,
  SUBJECT_A,
  SUBJECT_B,
  startEnforcementStack,
  WEBHOOK_PATH,
} from '../support/enforcement-stack.ts';
import { ACCESS_KEY, postJson } from '../support/stack.ts';

const CHAT = { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'Say something short.' }] };
const INSUFFICIENT_MESSAGE =
  'The account balance is insufficient for this request; top up the wallet and retry';

function chat(stack: EnforcementStack, requestId?: string, key = ACCESS_KEY) {
  return postJson(`${stack.url}/v1/chat/completions`, CHAT, {
    authorization: `Bearer ${key}`,
    ...(requestId === undefined ? {} : { 'x-router-request-id': requestId }),
  });
}

async function subjectsOnDisk(stack: EnforcementStack): Promise<string> {
  return readFile(join(stack.stateDir, SUBJECTS_FILE), 'utf8').catch(() => '');
}

describe('spend down, block, credit, unblock', () => {
  let stack: EnforcementStack;
  before(async () => {
    // A few requests' worth of gpt-5.4-mini at 0.15 / 0.6 USD per 1M tokens.
    stack = await startEnforcementStack({ wallets: { [`api_key:${SUBJECT_A}`]: '0.00004' } });
  });
  after(() => stack.close());

  test('a subject spends down to zero -> insufficient_balance -> the next request is 402; credit -> served', async () => {
    const sim = stack.billing;
    let served = 0;
    // Spend with real requests; after each, wait until billing has charged it.
    while (sim.webhooksSent.length === 0) {
      const r = await chat(stack);
      assert.equal(r.status, 200, `request ${served + 1} is served while the balance is positive`);
      served++;
      await sim.waitForEvents(served, 10_000);
      assert.ok(served < 50, 'the wallet should run out');
    }
    assert.ok(served >= 2, `spent down over several requests (${served})`);
    const [blockedDelivery] = await sim.waitForWebhooks(1, 10_000);
    assert.ok(blockedDelivery);
    assert.equal(blockedDelivery.type, 'wallet.insufficient_balance');
    assert.equal(blockedDelivery.status, 204, 'the gateway port answered the webhook 2xx');
    assert.equal(blockedDelivery.attempts.length, 1);
    assert.ok(new Decimal(sim.balance('api_key', SUBJECT_A)).lte(0), 'the wallet is spent');

    // The very next request: 402 with the exact body of docs/billing.md, though its "allowed" answer was cached.
    const refused = await chat(stack, 'req-after-block');
    assert.equal(refused.status, 402);
    assert.deepEqual(refused.json, {
      error: {
        message: `${INSUFFICIENT_MESSAGE} (request id: req-after-block)`,
        type: 'billing_error',
        code: 'insufficient_balance',
      },
    });
    // Native endpoints answer in their own vendor's shape.
    const anthropic = await postJson(
      `${stack.url}/v1/messages`,
      { model: 'claude-sonnet-5', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-router-request-id': 'req-anthropic' },
    );
    assert.equal(anthropic.status, 402);
    assert.deepEqual(anthropic.json, {
      type: 'error',
      error: {
        type: 'billing_error',
        message: `${INSUFFICIENT_MESSAGE} (request id: req-anthropic)`,
        code: 'insufficient_balance',
      },
      request_id: 'req-anthropic',
    });
    const gemini = await postJson(
      `${stack.url}/v1beta/models/gemini-3.8-flash:generateContent`,
      { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
      { 'x-router-request-id': 'req-gemini' },
    );
    assert.equal(gemini.status, 402);
    assert.equal((gemini.json as { error: { status: string } }).error.status, 'FAILED_PRECONDITION');
    assert.equal(sim.accepted, served, 'refused requests are not billed');

    // Credit through the billing API -> balance_changed -> served again on the very next request.
    assert.equal(await stack.credit(SUBJECT_A, '10'), 200);
    const deliveries = await sim.waitForWebhooks(2, 10_000);
    assert.equal(deliveries[1]?.type, 'wallet.balance_changed');
    assert.equal(deliveries[1]?.status, 204);
    const again = await chat(stack);
    assert.equal(again.status, 200);
    const state = JSON.parse(await subjectsOnDisk(stack)) as {
      subjects: { id: string; state: { blocked: boolean; lastEvent: string } }[];
    };
    const mine = state.subjects.find((s) => s.id === SUBJECT_A);
    assert.equal(mine?.state.blocked, false);
    assert.equal(mine?.state.lastEvent, 'wallet.balance_changed');
  });

  test('forged, stale, replayed, oversized and malformed webhooks are refused and change nothing', async () => {
    const sim = stack.billing;
    const subject = { subject_type: 'api_key', subject_id: SUBJECT_A };
    const before = await subjectsOnDisk(stack);
    const url = stack.webhookUrl;
    const block = (o: Parameters<typeof sim.sendWebhook>[2]) =>
      sim.sendWebhook('wallet.insufficient_balance', subject, { url, ...o });
    const now = Math.floor(Date.now() / 1000);

    assert.equal((await block({ secret: 'whsec_forged' })).status, 401, 'forged');
    assert.equal((await block({ timestamp: now - 3600 })).status, 401, 'stale');
    assert.equal((await block({ omitSignature: true })).status, 401, 'unsigned');
    assert.equal((await block({ data: { pad: 'x'.repeat(70_000) } })).status, 413, 'oversized');
    assert.equal((await block({ rawBody: '{"id":"evt_x","type":' })).status, 400, 'malformed JSON');
    assert.equal((await block({ rawBody: '{"data":{}}', id: '' })).status, 400, 'no type');
    // Replays of the real insufficient_balance delivery (exact bytes; and a fresh signature, same id).
    const original = sim.webhooksSent.find((d) => d.type === 'wallet.insufficient_balance');
    assert.ok(original);
    assert.equal((await sim.replayWebhook({ ...original, url })).status, 204, 'replay answers 2xx');
    assert.equal((await block({ id: original.id })).status, 204, 'same id, new signature: duplicate');

    assert.equal(await subjectsOnDisk(stack), before, 'subject state unchanged on disk');
    assert.equal((await chat(stack)).status, 200, 'and the subject is still served');
  });
});

describe('balance lookups: burst and outage (failure_mode closed)', () => {
  let stack: EnforcementStack;
  before(async () => {
    stack = await startEnforcementStack({
      wallets: { [`api_key:${SUBJECT_A}`]: '5', [`api_key:${SUBJECT_B}`]: '5' },
      requestTimeoutMs: 200,
    });
  });
  after(() => stack.close());

  test('a burst of 200 concurrent requests from one subject makes one balance lookup', async () => {
    const results = await Promise.all(Array.from({ length: 200 }, () => chat(stack)));
    assert.deepEqual(new Set(results.map((r) => r.status)), new Set([200]));
    assert.equal(stack.billing.lookups, 1);
  });

  test('lookup error and hang: 503 billing_unavailable, and the next good lookup serves', async () => {
    const sim = stack.billing;
    const lookups = sim.lookups;
    sim.setFailure('lookup-error');
    const down = await chat(stack, 'req-down', ACCESS_KEY_B);
    assert.equal(down.status, 503);
    assert.deepEqual(down.json, {
      error: {
        message: 'The balance check is temporarily unavailable (request id: req-down)',
        type: 'billing_error',
        code: 'billing_unavailable',
      },
    });
    sim.setFailure('lookup-hang');
    assert.equal((await chat(stack, undefined, ACCESS_KEY_B)).status, 503);
    sim.setFailure('none');
    assert.equal((await chat(stack, undefined, ACCESS_KEY_B)).status, 200, 'errors were not cached');
    assert.equal(sim.lookups, lookups + 3);
    assert.equal((await chat(stack)).status, 200, 'the other subject kept its cached answer');
  });
});

describe('balance lookups: outage with failure_mode open', () => {
  let stack: EnforcementStack;
  before(async () => {
    stack = await startEnforcementStack({
      wallets: { [`api_key:${SUBJECT_A}`]: '0' },
      failureMode: 'open',
      requestTimeoutMs: 200,
    });
  });
  after(() => stack.close());

  test('lookup error and hang serve the request; a working lookup of an empty wallet refuses', async () => {
    const sim = stack.billing;
    sim.setFailure('lookup-error');
    assert.equal((await chat(stack)).status, 200);
    sim.setFailure('lookup-hang');
    assert.equal((await chat(stack)).status, 200);
    sim.setFailure('none');
    assert.equal((await chat(stack)).status, 402);
  });
});

describe('file mode across real processes: router-billing as a child of its own', () => {
  let stack: EnforcementStack;
  let child: ChildGateway | undefined;
  const spawnBilling = () =>
    spawnLogged(
      'bin/sidecar-main.ts',
      ['-c', stack.configFile],
      { ...stack.env, ROUTER_BILLING_LISTEN: '127.0.0.1:0', [GATEWAY_URL_ENV]: stack.url },
      'router-billing listening',
    );
  async function stopChild(): Promise<void> {
    const c = child;
    child = undefined;
    if (c === undefined) return;
    c.child.kill('SIGTERM');
    await c.exited;
  }
  before(async () => {
    stack = await startEnforcementStack({ wallets: { [`api_key:${SUBJECT_A}`]: '5' }, sidecar: false });
    child = await spawnBilling();
  });
  after(async () => {
    await stopChild();
    await stack.close();
  });

  test('the 2xx of the sidecar process implies the gateway process enforces it; dedupe survives a restart', async () => {
    const sim = stack.billing;
    const subject = { subject_type: 'api_key', subject_id: SUBJECT_A };
    assert.equal((await chat(stack)).status, 200, 'served, and the allowed answer is cached');
    assert.ok(child);
    const url = `${child.url}${WEBHOOK_PATH}`;
    const blocked = await sim.sendWebhook('wallet.insufficient_balance', subject, { url });
    assert.equal(blocked.status, 204);
    assert.equal((await chat(stack)).status, 402, 'the very next request');
    assert.equal((await sim.sendWebhook('wallet.balance_changed', subject, { url })).status, 204);
    assert.equal((await chat(stack)).status, 200);

    // Restart the sidecar process: the replayed block is still a duplicate.
    await stopChild();
    child = await spawnBilling();
    const replay = await sim.replayWebhook({ ...blocked, url: `${child.url}${WEBHOOK_PATH}` });
    assert.equal(replay.status, 204);
    assert.equal((await chat(stack)).status, 200, 'the replay changed nothing');
  });
});

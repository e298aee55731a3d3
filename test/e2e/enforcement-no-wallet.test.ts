// A subject the billing service has no wallet for (404 wallet_not_found), read as docs/billing.md
// "The pre-check" says: failure_mode closed treats it as an empty wallet (402 insufficient_balance with
// the usual body), open as a failed lookup (served, its usage event still sent); either way the answer is cached
// like a denial. In file mode and in shared-store (Redis) mode, with the real gateway, sidecar, billing
// simulator and upstream simulator.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ACCESS_KEY_B,
  type EnforcementStack,
  SUBJECT_A,
  SUBJECT_B,
  startEnforcementStack,
} from '../support/enforcement-stack.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { ACCESS_KEY, postJson } from '../support/stack.ts';

const CHAT = { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'Say something short.' }] };
const INSUFFICIENT_MESSAGE =
  'The account balance is insufficient for this request; top up the wallet and retry';

function chat(stack: EnforcementStack, key: string, requestId?: string) {
  return postJson(`${stack.url}/v1/chat/completions`, CHAT, {
    authorization: `Bearer ${key}`,
    ...(requestId === undefined ? {} : { 'x-router-request-id': requestId }),
  });
}

async function metric(stack: EnforcementStack, series: string): Promise<number> {
  const text = await (await fetch(`${stack.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(series));
  return line === undefined ? 0 : Number(line.slice(series.length).trim());
}

for (const mode of ['file', 'redis'] as const) {
  for (const failureMode of ['closed', 'open'] as const) {
    describe(`no wallet (${mode} store, failure_mode ${failureMode})`, () => {
      let redis: RedisServer | undefined;
      let stack: EnforcementStack;
      before(async () => {
        if (mode === 'redis') redis = await startRedis();
        // client_b (ACCESS_KEY_B) has no wallet at the billing simulator.
        stack = await startEnforcementStack({
          wallets: { [`api_key:${SUBJECT_A}`]: '5' },
          failureMode,
          deniedCacheTtlMs: 60_000,
          ...(redis === undefined ? {} : { redisUrl: redis.url }),
        });
      });
      after(async () => {
        await stack.close();
        await redis?.close();
      });

      if (failureMode === 'closed') {
        test('402 insufficient_balance with spec 7 body, as for an empty wallet, cached like a denial', async () => {
          const lookups = stack.billing.lookups;
          const first = await chat(stack, ACCESS_KEY_B, 'req-no-wallet');
          assert.equal(first.status, 402);
          assert.deepEqual(first.json, {
            error: {
              message: `${INSUFFICIENT_MESSAGE} (request id: req-no-wallet)`,
              type: 'billing_error',
              code: 'insufficient_balance',
            },
          });
          assert.equal(stack.billing.lookups, lookups + 1, 'the billing service was asked once');
          const again = await chat(stack, ACCESS_KEY_B, 'req-no-wallet-2');
          assert.equal(again.status, 402);
          assert.equal(stack.billing.lookups, lookups + 1, 'the answer was cached');
          assert.equal(stack.upstream.requests.length, 0, 'nothing reached the upstream');
          assert.equal(await metric(stack, 'router_balance_checks_total{result="no_wallet"}'), 1);
          assert.equal(await metric(stack, 'router_balance_checks_total{result="cached_denied"}'), 1);
          assert.equal((await chat(stack, ACCESS_KEY)).status, 200, 'a subject with a wallet is served');
        });
      } else {
        test('served like a failed lookup, its usage events sent, the answer cached', async () => {
          const lookups = stack.billing.lookups;
          const first = await chat(stack, ACCESS_KEY_B, 'req-open-no-wallet');
          assert.equal(first.status, 200, first.text);
          const again = await chat(stack, ACCESS_KEY_B, 'req-open-no-wallet-2');
          assert.equal(again.status, 200, again.text);
          assert.equal(stack.billing.lookups, lookups + 1, 'the answer was cached');
          assert.equal(stack.upstream.requests.length, 2, 'both reached the upstream');
          assert.equal(await metric(stack, 'router_balance_checks_total{result="no_wallet_open"}'), 2);
          assert.equal(await metric(stack, 'router_balance_checks_total{result="no_wallet"}'), 0);
          await stack.billing.waitForEvents(2, 10_000);
          const ids = stack.billing.events
            .filter((e) => e.subject_id === SUBJECT_B)
            .map((e) => e.external_event_id)
            .sort();
          assert.deepEqual(ids, ['req-open-no-wallet', 'req-open-no-wallet-2']);
        });
      }
    });
  }
}

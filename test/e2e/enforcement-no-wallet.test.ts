// A subject the billing service has no wallet for is refused for good, not "temporarily": 402
// insufficient_balance with a message naming the missing wallet, in both failure modes, cached like a
// denial, in file mode and in shared-store (Redis) mode. Real gateway, sidecar, billing simulator
// (which answers 404 wallet_not_found for an unknown subject) and upstream simulator.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ACCESS_KEY_B,
  type EnforcementStack,
  SUBJECT_A,
  startEnforcementStack,
} from '../support/enforcement-stack.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { ACCESS_KEY, postJson } from '../support/stack.ts';

const CHAT = { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'Say something short.' }] };
const NO_WALLET_MESSAGE =
  'This subject has no wallet at the billing service, so its requests cannot be paid for; ask the operator to set up the billing account';

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

      test('402 insufficient_balance saying the subject has no wallet, cached like a denial', async () => {
        const lookups = stack.billing.lookups;
        const first = await chat(stack, ACCESS_KEY_B, 'req-no-wallet');
        assert.equal(first.status, 402);
        assert.deepEqual(first.json, {
          error: {
            message: `${NO_WALLET_MESSAGE} (request id: req-no-wallet)`,
            type: 'billing_error',
            code: 'insufficient_balance',
          },
        });
        assert.equal(stack.billing.lookups, lookups + 1, 'the billing service was asked once');
        const again = await chat(stack, ACCESS_KEY_B, 'req-no-wallet-2');
        assert.equal(again.status, 402);
        assert.match((again.json as { error: { message: string } }).error.message, /has no wallet/);
        assert.equal(stack.billing.lookups, lookups + 1, 'the answer was cached');
        assert.equal(stack.upstream.requests.length, 0, 'nothing reached the upstream');
        assert.equal(await metric(stack, 'router_balance_checks_total{result="no_wallet"}'), 1);
        assert.equal(await metric(stack, 'router_balance_checks_total{result="cached_denied"}'), 1);
        assert.equal((await chat(stack, ACCESS_KEY)).status, 200, 'a subject with a wallet is served');
      });
    });
  }
}

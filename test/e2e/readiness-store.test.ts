// /readyz against a real redis-server that is stopped (SIGKILL) and started again: not ready (503) within
// a second when requests would fail without the store (access_key_mode redis_only or redis_preferred,
// balance enforcement with failure_mode closed), with store.connected false and the reason; ready again
// once it returns. With file_only keys and enforcement open (or off) it stays 200 and still reports the
// store's connectivity. Each state is reached by polling /readyz, bounded; no fixed sleeps.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type EnforcementStack, SUBJECT_A, startEnforcementStack } from '../support/enforcement-stack.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { ACCESS_KEY, postJson, type Stack, startStack } from '../support/stack.ts';

interface ReadyBody {
  ready: boolean;
  store: { enabled: boolean; connected?: boolean; required?: boolean; reason?: string };
}

async function readyz(url: string): Promise<{ status: number; body: ReadyBody }> {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: (await res.json()) as ReadyBody };
}

/** Polls /readyz until `done` holds, at most `withinMs`; returns the answer and how long it took. */
async function pollReadyz(
  url: string,
  done: (r: { status: number; body: ReadyBody }) => boolean,
  withinMs: number,
): Promise<{ status: number; body: ReadyBody; ms: number }> {
  const start = performance.now();
  let last: { status: number; body: ReadyBody } | undefined;
  while (performance.now() - start < withinMs) {
    last = await readyz(url);
    if (done(last)) return { ...last, ms: performance.now() - start };
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  assert.fail(`/readyz did not reach the state within ${withinMs} ms; last: ${JSON.stringify(last)}`);
}

const down = (r: { body: ReadyBody }) => r.body.store.connected === false;
const up = (r: { body: ReadyBody }) => r.body.store.connected === true;

/** Stop Redis: 503 within a second, with the reason; start it: 200 again. */
async function outageIsNotReady(redis: RedisServer, url: string, reason: RegExp): Promise<void> {
  const before = await pollReadyz(url, up, 10_000);
  assert.equal(before.status, 200, JSON.stringify(before.body));
  assert.equal(before.body.store.required, true);
  assert.equal(before.body.store.reason, undefined);
  await redis.stop();
  const gone = await pollReadyz(url, down, 1_000);
  assert.equal(gone.status, 503, JSON.stringify(gone.body));
  assert.equal(gone.body.ready, false);
  assert.match(gone.body.store.reason ?? '', reason);
  await redis.start();
  const back = await pollReadyz(url, (r) => r.status === 200, 15_000);
  assert.equal(back.body.store.connected, true);
  assert.equal(back.body.store.reason, undefined);
}

/** Stop Redis: still 200, reporting store.connected false; start it: connected again. */
async function outageStaysReady(redis: RedisServer, url: string): Promise<void> {
  const before = await pollReadyz(url, up, 10_000);
  assert.equal(before.status, 200);
  assert.equal(before.body.store.required, undefined);
  await redis.stop();
  const gone = await pollReadyz(url, down, 1_000);
  assert.equal(gone.status, 200, JSON.stringify(gone.body));
  assert.equal(gone.body.ready, true);
  assert.equal(gone.body.store.reason, undefined);
  await redis.start();
  await pollReadyz(url, (r) => r.status === 200 && up(r), 15_000);
}

function storeYaml(redis: RedisServer, mode: string): string {
  return [
    'store:',
    '  enabled: true',
    `  addr: ${redis.url}`,
    `  key_prefix: "ready${process.pid}-${mode}:"`,
    '  access_key_hash_secret: readiness-hash-secret',
    `  access_key_mode: ${mode}`,
  ].join('\n');
}

for (const mode of ['redis_only', 'redis_preferred'] as const) {
  describe(`/readyz with access_key_mode ${mode}`, () => {
    let redis: RedisServer;
    let stack: Stack;
    before(async () => {
      redis = await startRedis();
      stack = await startStack({ extraYaml: storeYaml(redis, mode) });
    });
    after(async () => {
      await stack.close();
      await redis.close();
    });

    test('503 with the reason while Redis is away, as requests are refused; 200 once it is back', async () => {
      await outageIsNotReady(
        redis,
        stack.url,
        new RegExp(`access_key_mode ${mode}.*authentication_unavailable`),
      );
      // While it was away the requests this readiness stands for were refused; prove it now, once more.
      await redis.stop();
      await pollReadyz(stack.url, down, 1_000);
      const refused = await postJson(`${stack.url}/v1/chat/completions`, {
        model: 'gpt-5.4-mini',
        messages: [],
      });
      assert.equal(refused.status, 503);
      assert.equal((refused.json as { error: { code: string } }).error.code, 'authentication_unavailable');
      await redis.start();
      await pollReadyz(stack.url, (r) => r.status === 200, 15_000);
    });
  });
}

describe('/readyz with access_key_mode file_only, billing off', () => {
  let redis: RedisServer;
  let stack: Stack;
  before(async () => {
    redis = await startRedis();
    stack = await startStack({ extraYaml: storeYaml(redis, 'file_only') });
  });
  after(async () => {
    await stack.close();
    await redis.close();
  });

  test('stays 200 while Redis is away and reports store.connected false; requests are served', async () => {
    await outageStaysReady(redis, stack.url);
    const chat = { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] };
    assert.equal((await postJson(`${stack.url}/v1/chat/completions`, chat)).status, 200);
  });
});

for (const failureMode of ['closed', 'open'] as const) {
  describe(`/readyz with file_only keys and balance enforcement failure_mode ${failureMode}`, () => {
    let redis: RedisServer;
    let stack: EnforcementStack;
    before(async () => {
      redis = await startRedis();
      stack = await startEnforcementStack({
        wallets: { [`api_key:${SUBJECT_A}`]: '5' },
        failureMode,
        redisUrl: redis.url,
      });
    });
    after(async () => {
      await stack.close();
      await redis.close();
    });

    if (failureMode === 'closed') {
      test('503 with the reason while Redis is away, 200 once it is back', async () => {
        await outageIsNotReady(redis, stack.url, /failure_mode closed.*billing_unavailable/);
      });
    } else {
      test('stays 200 while Redis is away, reporting store.connected false', async () => {
        await outageStaysReady(redis, stack.url);
        const chat = { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] };
        const served = await postJson(`${stack.url}/v1/chat/completions`, chat, {
          authorization: `Bearer ${ACCESS_KEY}`,
        });
        assert.equal(served.status, 200, served.text);
      });
    }
  });
}

describe('/readyz in file mode', () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack.close();
  });

  test('no shared store: 200, store.enabled false and no connectivity to report', async () => {
    const r = await readyz(stack.url);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.store, { enabled: false });
  });
});

// Configuration paths that only a non-default value exercises, end to end against the simulators:
// billing.fallback_subject_id (master-key requests only: an unknown or missing key is always 401 and
// bills nobody), a non-default billing.subject_type (in the events, in the balance lookups and in the
// webhooks' subjects), a custom balance_enforcement.webhook_path (at the gateway and the sidecar), and
// store.username: gateway and sidecar log in to a real redis-server as an ACL user limited to the key
// prefix.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openRedisStores } from '../../store/redis-store.ts';
import { type BillingStack, startBillingStack } from '../support/billing-stack.ts';
import {
  ACCESS_KEY_B,
  type EnforcementStack,
  SUBJECT_A,
  SUBJECT_B,
  startEnforcementStack,
  WEBHOOK_PATH,
} from '../support/enforcement-stack.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { ACCESS_KEY, MASTER_KEY } from '../support/stack.ts';

const CHAT = { model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'Say something short.' }] };

async function chat(
  url: string,
  rid: string,
  authorization: string | undefined,
): Promise<{ status: number; body: { error?: { code?: string; message?: string } } }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-router-request-id': rid,
      ...(authorization === undefined ? {} : { authorization }),
    },
    body: JSON.stringify(CHAT),
  });
  return { status: res.status, body: (await res.json()) as { error?: { code?: string } } };
}

describe('billing.fallback_subject_id applies to master-key requests only', () => {
  let stack: BillingStack;
  before(async () => {
    stack = await startBillingStack({
      billing: { fallback_subject_id: 'house-account' },
      billingSim: { wallets: { 'api_key:house-account': '1000' } },
    });
  });
  after(() => stack.close());

  test('unknown, malformed and missing keys are 401 and bill nobody; the master key bills the fallback', async () => {
    const refused = [
      await chat(stack.url, 'fb-unknown', 'Bearer ak_not_a_configured_key'),
      await chat(stack.url, 'fb-empty', 'Bearer '),
      await chat(stack.url, 'fb-missing', undefined),
    ];
    for (const r of refused) {
      assert.equal(r.status, 401);
      assert.equal(r.body.error?.code, 'invalid_api_key');
    }
    assert.equal(stack.upstream.requests.length, 0, 'no refused request reached a provider');
    assert.equal((await chat(stack.url, 'fb-master', `Bearer ${MASTER_KEY}`)).status, 200);
    const billed = await stack.eventFor('fb-master');
    assert.equal(billed.subject_id, 'house-account');
    assert.equal(billed.raw_json.meta.subject_id, 'house-account');
    await stack.sidecar?.worker?.waitForDrain();
    assert.deepEqual(
      stack.billing.events.map((e) => e.external_event_id),
      ['fb-master'],
      'only the master-key request was billed',
    );
  });
});

describe('billing.subject_type team with balance_enforcement.webhook_path /hooks/billing-in', () => {
  const PATH = '/hooks/billing-in';
  let stack: EnforcementStack;
  before(async () => {
    stack = await startEnforcementStack({
      // client_b's wallet exists under the default type only: a lookup under `team` does not find it.
      wallets: { [`team:${SUBJECT_A}`]: '5', [`api_key:${SUBJECT_B}`]: '5' },
      subjectType: 'team',
      webhookPath: PATH,
      failureMode: 'closed',
    });
  });
  after(() => stack.close());

  test('events carry subject_type team, and balance lookups ask for it', async () => {
    assert.equal((await chat(stack.url, 'st-a', `Bearer ${ACCESS_KEY}`)).status, 200);
    const b = await chat(stack.url, 'st-b', `Bearer ${ACCESS_KEY_B}`);
    assert.equal(b.status, 402, 'no wallet under team for client_b');
    assert.equal(b.body.error?.code, 'insufficient_balance');
    await stack.billing.waitForEvents(1, 10_000);
    const [event] = stack.billing.events;
    assert.equal(event?.external_event_id, 'st-a');
    assert.equal(event?.subject_type, 'team');
    assert.equal(event?.subject_id, SUBJECT_A);
    assert.equal(event?.raw_json.meta.subject_type, 'team');
  });

  test('webhooks arrive on the custom path (gateway and sidecar) and block the team subject', async () => {
    // The default path is nothing special any more, at the gateway or at the sidecar.
    for (const base of [stack.url, stack.sidecar!.url]) {
      const res = await fetch(`${base}${WEBHOOK_PATH}`, { method: 'POST', body: '{}' });
      assert.equal(res.status, 404, `${base}${WEBHOOK_PATH}`);
      await res.body?.cancel();
    }
    const direct = await stack.billing.sendWebhook(
      'wallet.available_balance.threshold_crossed',
      { subject_type: 'team', subject_id: SUBJECT_A },
      { url: `${stack.sidecar!.url}${PATH}` },
    );
    assert.equal(direct.status, 204, 'the sidecar serves the custom path itself');
    // Through the gateway's port (the simulator's webhook URL ends in the custom path).
    const blocked = await stack.billing.sendWebhook('wallet.insufficient_balance', {
      subject_type: 'team',
      subject_id: SUBJECT_A,
    });
    assert.equal(blocked.status, 204);
    assert.ok(blocked.url?.endsWith(PATH), blocked.url);
    const refused = await chat(stack.url, 'st-blocked', `Bearer ${ACCESS_KEY}`);
    assert.equal(refused.status, 402);
    const lifted = await stack.billing.sendWebhook('wallet.balance_changed', {
      subject_type: 'team',
      subject_id: SUBJECT_A,
    });
    assert.equal(lifted.status, 204);
    assert.equal((await chat(stack.url, 'st-lifted', `Bearer ${ACCESS_KEY}`)).status, 200);
  });
});

describe('store.username: gateway and sidecar log in as a Redis ACL user', () => {
  const USER = 'router-gw';
  const PASSWORD = 'acl-secret-pw';
  const PREFIX = `acl${process.pid}:`;
  const SECRET = 'ak_acl_client_secret';
  let redis: RedisServer;
  let stack: BillingStack;
  before(async () => {
    redis = await startRedis();
    // Only keys and channels under the prefix: any command outside it would fail with NOPERM.
    await redis.admin.call(
      'ACL',
      'SETUSER',
      USER,
      'on',
      `>${PASSWORD}`,
      `~${PREFIX}*`,
      `&${PREFIX}*`,
      '+@all',
    );
    const seed = await openRedisStores(
      testStoreConfig(redis.url, { keyPrefix: PREFIX, username: USER, password: PASSWORD }),
    );
    await seed.accessKeys.create(testKeyRecord('acl-client', SECRET));
    await seed.state.close();
    stack = await startBillingStack({
      extraYaml: [
        'store:',
        '  enabled: true',
        `  addr: ${redis.url}`,
        `  username: ${USER}`,
        `  password: ${PASSWORD}`,
        `  key_prefix: "${PREFIX}"`,
        '  access_key_hash_secret: test-hash-secret',
        '  access_key_mode: redis_only',
      ].join('\n'),
      billingSim: { wallets: { 'api_key:acl-client': '1000' } },
    });
  });
  after(async () => {
    await stack.close();
    await redis.close();
  });

  test('a key looked up in the store is served and billed through the stream, as that user', async () => {
    assert.equal((await chat(stack.url, 'acl-1', `Bearer ${SECRET}`)).status, 200);
    const event = await stack.eventFor('acl-1');
    assert.equal(event.subject_id, 'acl-client');
    const clients = String(await redis.admin.call('CLIENT', 'LIST'))
      .trim()
      .split('\n')
      .map((line) => Object.fromEntries(line.split(' ').map((kv) => kv.split('=') as [string, string])));
    const ours = clients.filter((c) => c.name?.startsWith('router-'));
    assert.ok(
      ours.some((c) => c.name?.startsWith('router-gateway')),
      JSON.stringify(ours),
    );
    assert.ok(
      ours.some((c) => c.name?.startsWith('router-billing')),
      JSON.stringify(ours),
    );
    for (const c of ours) assert.equal(c.user, USER, `${c.name} logged in as ${c.user}`);
    const ready = (await (await fetch(`${stack.url}/readyz`)).json()) as { store: { connected: boolean } };
    assert.equal(ready.store.connected, true);
  });

  test('the credentials are what Redis checks: the wrong password leaves the store unconnected', async () => {
    for (const [password, connected] of [
      [PASSWORD, true],
      ['not-it', false],
    ] as const) {
      const stores = await openRedisStores(
        testStoreConfig(redis.url, { keyPrefix: PREFIX, username: USER, password }),
      );
      try {
        assert.equal((await stores.state.health()).connected, connected, password);
      } finally {
        await stores.state.close();
      }
    }
  });
});

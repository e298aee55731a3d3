// Shared-store mode through Redis Sentinel, against real servers: a primary, a replica and a Sentinel.
// The store and the billing queue find the primary by the Sentinel, and after a failover they write to
// the promoted replica: keys made before it are still there, and events queued on both sides of it are
// all on the new primary's stream, each once.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { StoreConfig } from '../../common/config-types.ts';
import { hashAccessKey } from '../../hooks/builtin/auth.ts';
import { openRedisBillingSink } from '../../proxy/redis-queue.ts';
import { redactAddr } from '../../store/redis-client.ts';
import { openRedisStores } from '../../store/redis-store.ts';
import { testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { SENTINEL_NAME, type SentinelSetup, startSentinelSetup } from '../support/redis-sentinel.ts';
import { makeEvent } from '../support/usage-events.ts';

let setup: SentinelSetup;
let config: StoreConfig;

before(async () => {
  setup = await startSentinelSetup();
  // No host in the address: with sentinels it gives only credentials, database and TLS.
  config = testStoreConfig('', {
    sentinels: [{ host: '127.0.0.1', port: setup.sentinelPort }],
    sentinelName: SENTINEL_NAME,
    billingWaitReplicas: 1,
    operationTimeoutMs: 1000,
  });
});
after(async () => {
  await setup?.close();
});

test('logs name the sentinels, never an address with credentials', () => {
  assert.equal(redactAddr(config.addr, config), `sentinel ${SENTINEL_NAME}@127.0.0.1:${setup.sentinelPort}`);
});

test('keys and queued events survive a failover; both sides of it reach the new primary once', async () => {
  const spoolRoot = await mkdtemp(join(tmpdir(), 'router-sentinel-spool-'));
  const stores = await openRedisStores(config, { currencies: ['USD'] });
  // As the gateway opens it: a batch the replica did not take goes to the local spool, which moves it to
  // the stream of whichever primary answers next.
  const sink = await openRedisBillingSink(config, { spoolRoot });
  try {
    assert.equal(await setup.primaryPort(), setup.primary.port);
    assert.equal(await stores.accessKeys.create(testKeyRecord('before-failover', 'ak_before')), 'created');
    for (let i = 0; i < 20; i++) await sink.queue.enqueue(makeEvent(i));
    await sink.queue.recorded?.();

    await setup.failover();

    // The clients learn of the new primary from the Sentinel; commands in the switch may fail, as when a
    // single endpoint restarts, and the next ones succeed.
    const hash = hashAccessKey('test-hash-secret', 'ak_before');
    await eventually(
      async () => (await stores.state.view({ keyHash: hash })).key?.name === 'before-failover',
    );
    await eventually(
      async () => (await stores.accessKeys.create(testKeyRecord('after', 'ak_after'))) !== 'exists',
    );
    // Every enqueue resolves: on the stream, or in the spool when the write was not replicated.
    for (let i = 20; i < 40; i++) await sink.queue.enqueue(makeEvent(i));
    await sink.queue.recorded?.();

    const stream = `${config.keyPrefix}${config.billingStream}`;
    const expected = Array.from({ length: 40 }, (_, i) => `req-${i}`).sort();
    const onNewPrimary = async (): Promise<string[]> => {
      const entries = (await setup.replica.admin.xrange(stream, '-', '+')) as [string, string[]][];
      const ids = entries.map(
        ([, f]) => (JSON.parse(f[1]!) as { external_event_id: string }).external_event_id,
      );
      return [...new Set(ids)].sort();
    };
    await eventually(async () => (await onNewPrimary()).length === expected.length);
    assert.deepEqual(await onNewPrimary(), expected, 'every event on the new primary');
  } finally {
    await sink.close();
    await stores.close();
    await rm(spoolRoot, { recursive: true, force: true });
  }
});

/** Retries an operation that may fail while the clients switch primaries (bounded). */
async function eventually(op: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await op().catch(() => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error('the store did not recover after the failover');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

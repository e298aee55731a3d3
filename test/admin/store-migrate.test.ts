// `router-admin store migrate`: a single endpoint's store (earlier layout) copied into a real Redis Cluster
// in the cluster layout: access keys (a revoked one stays revoked), subject state, webhook ids with their
// TTL; queued usage events left at the source unless --include-events moves them; a second run changes
// nothing; a key present in the target with another secret is a conflict.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { runAdmin } from '../../admin/cli.ts';
import { hashAccessKey } from '../../hooks/builtin/auth.ts';
import { createKeyLayout } from '../../store/redis-client.ts';
import { openRedisStores } from '../../store/redis-store.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';
import { type RedisClusterSetup, startRedisCluster } from '../support/redis-cluster.ts';

const PREFIX = 'mig:';
let source: RedisServer;
let cluster: RedisClusterSetup;
let dir: string;
let configFile: string;

before(async () => {
  source = await startRedis();
  cluster = await startRedisCluster();
  dir = await mkdtemp(join(tmpdir(), 'router-store-migrate-'));
  configFile = join(dir, 'router.yaml');
  const addr = cluster.seeds
    .split(',')
    .map((s) => `redis://${s}`)
    .join(',');
  await writeFile(
    configFile,
    [
      'store:',
      '  enabled: true',
      '  cluster: true',
      `  addr: ${addr}`,
      '  billing_stream_shards: 2',
      `  key_prefix: "${PREFIX}"`,
      '  access_key_hash_secret: test-hash-secret',
      '',
    ].join('\n'),
  );
  const old = await openRedisStores(testStoreConfig(source.url, { keyPrefix: PREFIX }));
  try {
    await old.accessKeys.create(testKeyRecord('mig-a', 'ak_mig_a'));
    await old.accessKeys.create(testKeyRecord('mig-b', 'ak_mig_b'));
    await old.accessKeys.revoke('mig-b');
    await old.accessKeys.create(testKeyRecord('mig-c', 'ak_mig_c_source'));
    await old.state.setSubject(
      { type: 'api_key', id: 'mig-a' },
      { blocked: true, lastEvent: 'wallet.insufficient_balance', lastEventId: 'evt_m1', updatedAt: 1 },
    );
    assert.equal(await old.state.claimWebhook('evt_m1', 3_600_000), true);
  } finally {
    await old.close();
  }
  for (let i = 0; i < 3; i++)
    await source.admin.xadd(`${PREFIX}billing:events`, '*', 'payload', `{"n":${i}}`);
});

after(async () => {
  await source?.close();
  await cluster?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

async function admin(...argv: string[]): Promise<{ code: number; out: string }> {
  const chunks: string[] = [];
  const sink = (into: string[]) =>
    new Writable({
      write(c: Buffer, _e, done) {
        into.push(c.toString());
        done();
      },
    });
  const code = await runAdmin([...argv, '--config', configFile], {
    stdout: sink(chunks),
    stderr: sink(chunks),
  });
  return { code, out: chunks.join('') };
}

test('store migrate copies into the cluster layout; events stay unless asked; a rerun changes nothing', async () => {
  // In the target already under another secret: a conflict, left alone.
  const target = await openRedisStores(
    testStoreConfig(
      cluster.seeds
        .split(',')
        .map((s) => `redis://${s}`)
        .join(','),
      {
        cluster: true,
        keyPrefix: PREFIX,
      },
    ),
  );
  try {
    await target.accessKeys.create(testKeyRecord('mig-c', 'ak_mig_c_target'));

    const dry = await admin('store', 'migrate', '--from', source.url, '--dry-run');
    assert.equal(dry.code, 1, dry.out);
    assert.match(dry.out, /access keys: 2 would create, 0 unchanged, 1 conflicts/);
    assert.equal(
      await cluster.admin.exists(`${PREFIX}{state}access_key:mig-a`),
      0,
      'a dry run writes nothing',
    );

    const first = await admin('store', 'migrate', '--from', source.url);
    assert.equal(first.code, 1, first.out);
    assert.match(first.out, /access keys: 2 created, 0 unchanged, 1 conflicts/);
    assert.match(first.out, /CONFLICT {2}mig-c/);
    assert.match(first.out, /subject states: 1 copied/);
    assert.match(first.out, /webhook ids: 1 copied/);
    assert.match(first.out, /3 left at the source/);

    const active = await target.state.view({ keyHash: hashAccessKey('test-hash-secret', 'ak_mig_a') });
    assert.equal(active.key?.status, 'active');
    assert.equal(active.subject?.blocked, true, 'the subject state came along');
    const revoked = await target.state.view({ keyHash: hashAccessKey('test-hash-secret', 'ak_mig_b') });
    assert.equal(revoked.key?.status, 'revoked');
    assert.equal(await target.state.claimWebhook('evt_m1', 60_000), false, 'the webhook id came along');
    assert.ok((await cluster.admin.pttl(`${PREFIX}{state}webhook:evt_m1`)) > 3_000_000, 'with its TTL');
    const kept = await target.state.view({ keyHash: hashAccessKey('test-hash-secret', 'ak_mig_c_target') });
    assert.equal(kept.key?.name, 'mig-c', 'the conflicting key is left as it was');

    const second = await admin('store', 'migrate', '--from', source.url, '--include-events');
    assert.match(second.out, /access keys: 0 created, 2 unchanged, 1 conflicts/);
    assert.match(second.out, /subject states: 0 copied, 1 already there/);
    assert.match(second.out, /usage events and dead letters: 3 moved/);
    const shard0 = createKeyLayout({ keyPrefix: PREFIX, billingStream: 'billing:events', cluster: true })
      .shards[0]!;
    assert.equal(await cluster.admin.xlen(shard0.stream), 3);
    assert.equal(await source.admin.xlen(`${PREFIX}billing:events`), 0);
  } finally {
    await target.close();
  }
});

test('store migrate: a bad --from is a usage error; an unreachable source changes nothing', async () => {
  assert.equal((await admin('store', 'migrate', '--from', 'http://x')).code, 2);
  const down = await admin('store', 'migrate', '--from', 'redis://127.0.0.1:1');
  assert.equal(down.code, 3, down.out);
  assert.match(down.out, /cannot connect to the source store redis:\/\/127\.0\.0\.1:1: connection refused/);
  assert.match(down.out, /check --from/);
});

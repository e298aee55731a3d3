// router-admin and rate limits, end to end against a real redis-server and real keys files: access-key
// create and update with limits and models, list showing them, a change reaching a gateway's cached view
// of the key, and subject set-limits in both modes. Flag values that are not valid are usage errors
// (exit 2) that change nothing.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { load as loadYaml } from 'js-yaml';
import { loadConfig } from '../../config/load.ts';
import { hashAccessKey } from '../../hooks/builtin/auth.ts';
import { openRedisStores } from '../../store/redis-store.ts';
import { waitUntil } from '../support/billing-stack.ts';
import { type RedisServer, startRedis, testStoreConfig } from '../support/redis.ts';
import { admin } from './run-admin.ts';

const HASH_SECRET = 'limits-test-hash-secret';
let redis: RedisServer;
let dir: string;

before(async () => {
  redis = await startRedis();
  dir = await mkdtemp(join(tmpdir(), 'router-admin-limits-'));
});
after(async () => {
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

async function storeConfig(name: string, prefix: string): Promise<string> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(
    file,
    [
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "${prefix}"`,
      `  access_key_hash_secret: ${HASH_SECRET}`,
      '  operation_timeout_ms: 200',
      '',
    ].join('\n'),
  );
  return file;
}

async function fileConfig(name: string): Promise<{ config: string; keys: string }> {
  const keys = join(dir, `${name}-keys.yaml`);
  await writeFile(keys, 'access_keys: []\n');
  const config = join(dir, `${name}.yaml`);
  await writeFile(
    config,
    [
      `keys: ${name}-keys.yaml`,
      'store:',
      '  enabled: false',
      `  access_key_hash_secret: ${HASH_SECRET}`,
      '',
    ].join('\n'),
  );
  return { config, keys };
}

interface ListedKey {
  name: string;
  limits?: Record<string, number>;
  models?: string[];
}

async function listJson(config: string): Promise<ListedKey[]> {
  const r = await admin(['access-key', 'list', '--config', config, '--json']);
  assert.equal(r.code, 0, r.err);
  return JSON.parse(r.out) as ListedKey[];
}

test('store mode: create with limits and models, list shows them, update sets, replaces and clears', async () => {
  const config = await storeConfig('store', 'rl1:');
  const created = await admin([
    'access-key',
    'create',
    '--config',
    config,
    '--name',
    'client-a',
    '--requests-per-minute',
    '600',
    '--tokens-per-minute',
    '200000',
    '--max-concurrent',
    '8',
    '--models',
    'gpt-*, claude-*',
  ]);
  assert.equal(created.code, 0, created.err);
  assert.match(created.err, /limits rpm=600,tpm=200000,concurrent=8, models gpt-\*,claude-\*/);
  const record = await redis.admin.hgetall('rl1:access_key:client-a');
  assert.deepEqual(JSON.parse(record.limits!), {
    requests_per_minute: 600,
    tokens_per_minute: 200000,
    max_concurrent: 8,
  });
  assert.deepEqual(JSON.parse(record.models!), ['gpt-*', 'claude-*']);
  assert.equal(record.version, '1');

  assert.equal((await admin(['access-key', 'create', '--config', config, '--name', 'plain'])).code, 0);
  const plain = await redis.admin.hgetall('rl1:access_key:plain');
  assert.equal('limits' in plain || 'models' in plain, false, 'no fields for a key without limits');

  const table = await admin(['access-key', 'list', '--config', config]);
  assert.equal(table.code, 0, table.err);
  const lines = table.out.trim().split('\n');
  assert.match(lines[0]!, /^NAME\s+SUBJECT\s+STATUS\s+EXPIRES\s+CREATED\s+LIMITS\s+MODELS$/);
  assert.match(
    lines[1]!,
    /^client-a\s+api_key:client-a\s+active\s+-\s+\S+\s+rpm=600,tpm=200000,concurrent=8\s+gpt-\*,claude-\*$/,
  );
  assert.match(lines[2]!, /^plain\s+api_key:plain\s+active\s+-\s+\S+\s+-\s+-$/);
  const listed = await listJson(config);
  assert.deepEqual(listed[0]?.limits, { requestsPerMinute: 600, tokensPerMinute: 200000, maxConcurrent: 8 });
  assert.deepEqual(listed[0]?.models, ['gpt-*', 'claude-*']);
  assert.equal(listed[1]?.limits, undefined);
  assert.equal(listed[1]?.models, undefined);

  const update = (...flags: string[]) =>
    admin(['access-key', 'update', '--config', config, '--name', 'client-a', ...flags]);
  const lowered = await update('--requests-per-minute', '30');
  assert.equal(lowered.code, 0, lowered.err);
  assert.match(
    lowered.out,
    /updated key client-a: limits rpm=30,tpm=200000,concurrent=8; models gpt-\*,claude-\*/,
  );
  assert.equal(await redis.admin.hget('rl1:access_key:client-a', 'version'), '2');

  const replaced = await update('--clear-limits', '--max-concurrent', '2', '--models', 'o3*');
  assert.equal(replaced.code, 0, replaced.err);
  assert.deepEqual(JSON.parse((await redis.admin.hget('rl1:access_key:client-a', 'limits'))!), {
    max_concurrent: 2,
  });
  assert.deepEqual(JSON.parse((await redis.admin.hget('rl1:access_key:client-a', 'models'))!), ['o3*']);

  const cleared = await update('--clear-limits', '--clear-models');
  assert.equal(cleared.code, 0, cleared.err);
  assert.match(cleared.out, /limits none of its own \(rate_limits\.per_key\); models none of its own/);
  assert.equal(await redis.admin.hexists('rl1:access_key:client-a', 'limits'), 0);
  assert.equal(await redis.admin.hexists('rl1:access_key:client-a', 'models'), 0);
  assert.equal(await redis.admin.hget('rl1:access_key:client-a', 'version'), '4');

  const unknown = await admin([
    'access-key',
    'update',
    '--config',
    config,
    '--name',
    'nope',
    '--max-concurrent',
    '1',
  ]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.err, /no key named nope/);
  assert.equal(await redis.admin.exists('rl1:access_key:nope'), 0);
});

test('store mode: an update reaches a running gateway that holds the key in its view cache', async () => {
  const config = await storeConfig('live', 'rl2:');
  const created = await admin(['access-key', 'create', '--config', config, '--name', 'live']);
  assert.equal(created.code, 0, created.err);
  const secret = created.out.trim();
  const gateway = await openRedisStores(
    testStoreConfig(redis.url, { keyPrefix: 'rl2:', accessKeyHashSecret: HASH_SECRET }),
    { viewCacheMs: 60_000 },
  );
  try {
    await waitUntil(() => gateway.viewCache?.live === true, 'tracking on');
    const query = { keyHash: hashAccessKey(HASH_SECRET, secret) };
    // Read until the answer is kept (a read that raced the create's own invalidation is not).
    await waitUntil(async () => {
      await gateway.state.view(query);
      return gateway.state.peekView?.(query) !== undefined;
    }, 'the key cached');
    assert.equal(gateway.state.peekView?.(query)?.key?.limits, undefined);

    const updated = await admin([
      'access-key',
      'update',
      '--config',
      config,
      '--name',
      'live',
      '--requests-per-minute',
      '30',
      '--models',
      'gpt-*',
    ]);
    assert.equal(updated.code, 0, updated.err);
    await waitUntil(() => gateway.state.peekView?.(query) === undefined, 'the cached record dropped');
    const key = (await gateway.state.view(query)).key;
    assert.deepEqual(key?.limits, { requestsPerMinute: 30 });
    assert.deepEqual(key?.models, ['gpt-*']);
  } finally {
    await gateway.close();
  }
});

test('flag values that are not valid are usage errors naming the flag; nothing is written', async () => {
  const config = await storeConfig('usage', 'rl3:');
  const cases: [string[], RegExp][] = [
    [['--requests-per-minute', '0'], /--requests-per-minute must be a positive integer, not "0"/],
    [['--tokens-per-minute', '1.5'], /--tokens-per-minute must be a positive integer, not "1\.5"/],
    [['--max-concurrent', 'many'], /--max-concurrent must be a positive integer, not "many"/],
    [['--requests-per-minute=-3'], /--requests-per-minute must be a positive integer, not "-3"/],
    [['--models', ' , '], /--models is empty, which would allow no model/],
    [['--models', 'gpt-[45]'], /--models: "gpt-\[45\]" is not a model id or a pattern using only \* and \?/],
  ];
  for (const [flags, message] of cases) {
    const r = await admin(['access-key', 'create', '--config', config, '--name', 'bad', ...flags]);
    assert.equal(r.code, 2, flags.join(' '));
    assert.match(r.err, message);
    assert.match(r.err, /\(router-admin access-key create --help shows the usage\)\n$/);
  }
  assert.deepEqual(await redis.admin.keys('rl3:*'), [], 'nothing created');

  assert.equal((await admin(['access-key', 'create', '--config', config, '--name', 'k'])).code, 0);
  const nothing = await admin(['access-key', 'update', '--config', config, '--name', 'k']);
  assert.equal(nothing.code, 2);
  assert.match(nothing.err, /nothing to change: give --requests-per-minute/);
  const both = await admin([
    'access-key',
    'update',
    '--config',
    config,
    '--name',
    'k',
    '--models',
    'gpt-*',
    '--clear-models',
  ]);
  assert.equal(both.code, 2);
  assert.match(both.err, /give --models or --clear-models, not both/);
  const bad = await admin([
    'access-key',
    'update',
    '--config',
    config,
    '--name',
    'k',
    '--max-concurrent',
    '0',
  ]);
  assert.equal(bad.code, 2);
  assert.match(bad.err, /\(router-admin access-key update --help shows the usage\)/);
  assert.equal(await redis.admin.hget('rl3:access_key:k', 'version'), '1', 'the key is unchanged');
});

test('file mode: create and update write limits and models on the entry; the gateway loader reads them', async () => {
  const { config, keys } = await fileConfig('file');
  const created = await admin([
    'access-key',
    'create',
    '--config',
    config,
    '--name',
    'local',
    '--tokens-per-minute',
    '5000',
    '--models',
    'gpt-*,claude-*',
  ]);
  assert.equal(created.code, 0, created.err);
  type Doc = { access_keys: { name: string; limits?: unknown; models?: unknown }[] };
  const entry = async () => ((loadYaml(await readFile(keys, 'utf8')) as Doc).access_keys ?? [])[0];
  assert.deepEqual((await entry())?.limits, { tokens_per_minute: 5000 });
  assert.deepEqual((await entry())?.models, ['gpt-*', 'claude-*']);

  const loaded = await loadConfig(config, { env: {} });
  assert.deepEqual(loaded.diagnostics, []);
  assert.deepEqual(loaded.config?.keys.accessKeys[0]?.limits, { tokensPerMinute: 5000 });
  assert.deepEqual(loaded.config?.keys.accessKeys[0]?.models, ['gpt-*', 'claude-*']);

  const updated = await admin([
    'access-key',
    'update',
    '--config',
    config,
    '--name',
    'local',
    '--max-concurrent',
    '3',
    '--clear-models',
  ]);
  assert.equal(updated.code, 0, updated.err);
  assert.match(updated.err, /re-?reads?|applies it from the keys file/);
  assert.deepEqual((await entry())?.limits, { tokens_per_minute: 5000, max_concurrent: 3 });
  assert.equal((await entry())?.models, undefined);

  const listed = await admin(['access-key', 'list', '--config', config]);
  assert.match(listed.out, /local\s+api_key:local\s+active\s+-\s+\S+\s+tpm=5000,concurrent=3\s+-$/m);
  assert.deepEqual((await listJson(config))[0]?.limits, { tokensPerMinute: 5000, maxConcurrent: 3 });

  const cleared = await admin([
    'access-key',
    'update',
    '--config',
    config,
    '--name',
    'local',
    '--clear-limits',
  ]);
  assert.equal(cleared.code, 0, cleared.err);
  assert.equal((await entry())?.limits, undefined);
  assert.equal(
    (await admin(['access-key', 'update', '--config', config, '--name', 'nope', '--clear-limits'])).code,
    1,
  );
});

test('subject set-limits, shared store: sets, merges, replaces and clears the subject hash', async () => {
  const config = await storeConfig('subject', 'rl4:');
  const key = 'rl4:{rl:team:team-x}:limits';
  const set = (...flags: string[]) =>
    admin([
      'subject',
      'set-limits',
      '--config',
      config,
      '--subject-type',
      'team',
      '--subject-id',
      'team-x',
      ...flags,
    ]);

  const first = await set('--max-concurrent', '8', '--requests-per-minute', '1200');
  assert.equal(first.code, 0, first.err);
  assert.equal(first.out, 'subject team:team-x: limits rpm=1200,concurrent=8\n');
  assert.deepEqual(await redis.admin.hgetall(key), { requests_per_minute: '1200', max_concurrent: '8' });

  const more = await set('--tokens-per-minute', '90000');
  assert.equal(more.code, 0, more.err);
  assert.deepEqual(await redis.admin.hgetall(key), {
    requests_per_minute: '1200',
    tokens_per_minute: '90000',
    max_concurrent: '8',
  });

  const replaced = await set('--clear', '--max-concurrent', '2');
  assert.equal(replaced.code, 0, replaced.err);
  assert.deepEqual(await redis.admin.hgetall(key), { max_concurrent: '2' });

  const cleared = await set('--clear');
  assert.equal(cleared.code, 0, cleared.err);
  assert.match(cleared.out, /no limits of its own \(rate_limits\.per_subject applies\)/);
  assert.equal(await redis.admin.exists(key), 0);

  const nothing = await set();
  assert.equal(nothing.code, 2);
  assert.match(nothing.err, /nothing to change/);
  const bad = await set('--tokens-per-minute', 'x');
  assert.equal(bad.code, 2);
  assert.match(bad.err, /--tokens-per-minute must be a positive integer/);
  assert.equal(await redis.admin.exists(key), 0);
});

test('subject set-limits, file mode: an error naming the rate_limits.subjects entry to write', async () => {
  const { config } = await fileConfig('subject-file');
  const r = await admin([
    'subject',
    'set-limits',
    '--config',
    config,
    '--subject-type',
    'team',
    '--subject-id',
    'team-x',
    '--requests-per-minute',
    '60',
    '--max-concurrent',
    '2',
  ]);
  assert.equal(r.code, 2);
  assert.equal(r.out, '');
  assert.match(r.err, /store\.enabled is false/);
  assert.match(
    r.err,
    /under rate_limits\.subjects as `"team:team-x": \{requests_per_minute: 60, max_concurrent: 2\}`/,
  );
});

test("migrate carries a keys-file entry's limits and models into the store", async () => {
  const keysFile = join(dir, 'migrate-keys.yaml');
  await writeFile(
    keysFile,
    [
      'access_keys:',
      '  - name: moved',
      '    value: ak_moved_secret',
      '    limits: { requests_per_minute: 60, max_concurrent: 4 }',
      '    models: ["gpt-*"]',
      '',
    ].join('\n'),
  );
  const config = await storeConfig('migrate', 'rl5:');
  const r = await admin(['access-key', 'migrate', '--config', config, '--from', keysFile]);
  assert.equal(r.code, 0, r.err);
  const record = await redis.admin.hgetall('rl5:access_key:moved');
  assert.deepEqual(JSON.parse(record.limits!), { requests_per_minute: 60, max_concurrent: 4 });
  assert.deepEqual(JSON.parse(record.models!), ['gpt-*']);
});

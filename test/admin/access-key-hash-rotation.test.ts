// router-admin during a hash-secret rotation (real redis-server, the real command): create, rotate and
// migrate record which secret hashed a key, and `list` counts the keys per secret so an operator can see
// how many are still on the previous one.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { runAdmin } from '../../admin/cli.ts';
import { hashAccessKey, hashSecretId } from '../../hooks/builtin/auth.ts';
import { openRedisStores } from '../../store/redis-store.ts';
import { type RedisServer, startRedis, testKeyRecord, testStoreConfig } from '../support/redis.ts';

const OLD = 'admin-rotation-old-secret';
const NEW = 'admin-rotation-new-secret';
const PREFIX = 'admrot:';
let redis: RedisServer;
let dir: string;

before(async () => {
  redis = await startRedis();
  dir = await mkdtemp(join(tmpdir(), 'router-admin-rotation-'));
});
after(async () => {
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

async function admin(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const sink = (to: string[]) =>
    new Writable({
      write(chunk: Buffer, _enc, done) {
        to.push(chunk.toString());
        done();
      },
    });
  const code = await runAdmin(argv, { stdout: sink(out), stderr: sink(err) });
  return { code, out: out.join(''), err: err.join('') };
}

async function config(name: string, secrets: string[]): Promise<string> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(
    file,
    ['store:', '  enabled: true', `  addr: ${redis.url}`, `  key_prefix: "${PREFIX}"`, ...secrets, ''].join(
      '\n',
    ),
  );
  return file;
}

test('keys are counted per hash secret: current, previous, unknown (older records), another secret', async () => {
  const onOld = await config('old', [`  access_key_hash_secret: ${OLD}`]);
  const onNew = await config('new', [`  access_key_hash_secret: ${NEW}`]);
  const rotating = await config('rotating', [
    `  access_key_hash_secret: ${NEW}`,
    `  previous_access_key_hash_secret: ${OLD}`,
  ]);

  const secrets = new Map<string, string>();
  for (const name of ['old-1', 'old-2']) {
    const created = await admin('access-key', 'create', '--config', onOld, '--name', name);
    assert.equal(created.code, 0);
    secrets.set(name, created.out.trim());
    assert.equal(await redis.admin.hget(`${PREFIX}access_key:${name}`, 'hash_secret_id'), hashSecretId(OLD));
  }
  assert.equal((await admin('access-key', 'create', '--config', rotating, '--name', 'new-1')).code, 0);
  assert.equal(await redis.admin.hget(`${PREFIX}access_key:new-1`, 'hash_secret_id'), hashSecretId(NEW));

  // Rotating a key during the window puts it on the new secret.
  const rotated = await admin('access-key', 'rotate', '--config', rotating, '--name', 'old-2');
  assert.equal(rotated.code, 0, rotated.err);
  const record = await redis.admin.hgetall(`${PREFIX}access_key:old-2`);
  assert.equal(record.secret_hash, hashAccessKey(NEW, rotated.out.trim()));
  assert.equal(record.hash_secret_id, hashSecretId(NEW));

  const keysFile = join(dir, 'keys.yaml');
  await writeFile(
    keysFile,
    ['access_keys:', '  - name: imported', '    value: ak_imported_secret', ''].join('\n'),
  );
  const migrated = await admin('access-key', 'migrate', '--config', rotating, '--from', keysFile);
  assert.equal(migrated.code, 0, migrated.out);
  assert.equal(await redis.admin.hget(`${PREFIX}access_key:imported`, 'hash_secret_id'), hashSecretId(NEW));

  // A record written before records named their secret.
  const stores = await openRedisStores(testStoreConfig(redis.url, { keyPrefix: PREFIX }));
  try {
    await stores.accessKeys.create(
      testKeyRecord('legacy', 'ak_legacy', { secretHash: hashAccessKey(OLD, 'ak_legacy') }),
    );
    assert.equal(await redis.admin.hexists(`${PREFIX}access_key:legacy`, 'hash_secret_id'), 0);

    const listed = await admin('access-key', 'list', '--config', rotating);
    assert.equal(listed.code, 0, listed.err);
    const lines = listed.out.trimEnd().split('\n');
    assert.match(lines[0]!, /^NAME\s+SUBJECT\s+STATUS\s+EXPIRES\s+CREATED\s+LIMITS\s+MODELS$/);
    assert.equal(lines.at(-1), 'hash secret: 3 current, 1 previous, 1 unknown');

    const json = await admin('access-key', 'list', '--config', rotating, '--json');
    const keys = JSON.parse(json.out) as { name: string; hashSecret: string }[];
    assert.deepEqual(
      keys.map((k) => [k.name, k.hashSecret]),
      [
        ['imported', 'current'],
        ['legacy', 'unknown'],
        ['new-1', 'current'],
        ['old-1', 'previous'],
        ['old-2', 'current'],
      ],
    );

    // Without the previous secret configured, old-1's secret is simply not one of ours.
    const plain = await admin('access-key', 'list', '--config', onNew);
    assert.equal(
      plain.out.trimEnd().split('\n').at(-1),
      'hash secret: 3 current, 0 previous, 1 unknown, 1 on another secret',
    );

    // A gateway moving both old keys as they are used (the same store call the auth hook makes).
    for (const secret of ['ak_legacy', secrets.get('old-1') ?? '']) {
      const moved = await stores.state.rehashAccessKey?.(
        hashAccessKey(OLD, secret),
        hashAccessKey(NEW, secret),
        hashSecretId(NEW),
      );
      assert.equal(moved?.moved, true);
    }
    const later = await admin('access-key', 'list', '--config', rotating);
    assert.equal(later.out.trimEnd().split('\n').at(-1), 'hash secret: 5 current, 0 previous, 0 unknown');
  } finally {
    await stores.close();
  }
});

test('migrate during the window moves a same-secret key stored under the previous secret', async () => {
  const prefix = 'admrot2:';
  const file = join(dir, 'rotating-2.yaml');
  await writeFile(
    file,
    [
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "${prefix}"`,
      `  access_key_hash_secret: ${NEW}`,
      `  previous_access_key_hash_secret: ${OLD}`,
      '',
    ].join('\n'),
  );
  const stores = await openRedisStores(testStoreConfig(redis.url, { keyPrefix: prefix }));
  try {
    await stores.accessKeys.create(
      testKeyRecord('kept', 'ak_kept_secret', { secretHash: hashAccessKey(OLD, 'ak_kept_secret') }),
    );
  } finally {
    await stores.close();
  }
  const keysFile = join(dir, 'kept.yaml');
  await writeFile(keysFile, ['access_keys:', '  - name: kept', '    value: ak_kept_secret', ''].join('\n'));

  const dry = await admin('access-key', 'migrate', '--config', file, '--from', keysFile, '--dry-run');
  assert.equal(dry.code, 0, dry.out);
  assert.match(dry.out, /0 would create, 1 unchanged, 0 conflicts/);
  assert.equal(
    await redis.admin.hget(`${prefix}access_key:kept`, 'secret_hash'),
    hashAccessKey(OLD, 'ak_kept_secret'),
  );

  const run = await admin('access-key', 'migrate', '--config', file, '--from', keysFile);
  assert.equal(run.code, 0, run.out);
  assert.match(run.out, /0 created, 1 unchanged, 0 conflicts/);
  const record = await redis.admin.hgetall(`${prefix}access_key:kept`);
  assert.equal(record.secret_hash, hashAccessKey(NEW, 'ak_kept_secret'));
  assert.equal(record.hash_secret_id, hashSecretId(NEW));
  assert.deepEqual(await redis.admin.hgetall(`${prefix}access_key:index`), {
    [hashAccessKey(NEW, 'ak_kept_secret')]: 'kept',
  });
});

test('file mode has no hash-secret line', async () => {
  const keysFile = join(dir, 'file-keys.yaml');
  await writeFile(keysFile, 'access_keys: []\n');
  const file = join(dir, 'file-mode.yaml');
  await writeFile(file, ['keys: file-keys.yaml', 'store:', '  enabled: false', ''].join('\n'));
  assert.equal((await admin('access-key', 'create', '--config', file, '--name', 'local')).code, 0);
  const listed = await admin('access-key', 'list', '--config', file);
  assert.equal(listed.code, 0);
  assert.equal(listed.out.includes('hash secret'), false);
  assert.equal(listed.out.trimEnd().split('\n').length, 2);
});

// What `create` and `rotate` say about the secret they print must be true in each mode: the store and a
// keys file with store.access_key_hash_secret keep only its HMAC ("shown once"); a keys file without it
// keeps the secret in plain text, and the message says where and how to avoid that.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { admin } from './run-admin.ts';

let redis: RedisServer;
let dir: string;

before(async () => {
  redis = await startRedis();
  dir = await mkdtemp(join(tmpdir(), 'router-admin-secret-'));
});
after(async () => {
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

async function fileMode(
  name: string,
  hashSecret: string | undefined,
): Promise<{ config: string; keys: string }> {
  const keys = join(dir, `${name}-keys.yaml`);
  await writeFile(keys, 'access_keys: []\n');
  const config = join(dir, `${name}.yaml`);
  await writeFile(
    config,
    [
      `keys: ${name}-keys.yaml`,
      'store:',
      '  enabled: false',
      ...(hashSecret === undefined ? [] : [`  access_key_hash_secret: ${hashSecret}`]),
      '',
    ].join('\n'),
  );
  return { config, keys };
}

test('file mode without a hash secret: not "shown once"; says the secret is in the keys file, in plain text', async () => {
  const { config, keys } = await fileMode('plain', undefined);
  const created = await admin(['access-key', 'create', '--config', config, '--name', 'p1']);
  assert.equal(created.code, 0, created.err);
  const secret = created.out.trim();
  assert.ok((await readFile(keys, 'utf8')).includes(`value: ${secret}`), 'the secret is in the file');
  assert.doesNotMatch(created.err, /shown once/);
  assert.match(
    created.err,
    new RegExp(`secret \\(stored in plain text in the keys file ${keys}, as the \`value\` of key p1`),
  );
  assert.match(created.err, /set store\.access_key_hash_secret \(ROUTER_ACCESS_KEY_HASH_SECRET\)/);
  assert.equal(created.err.includes(secret), false, 'the secret itself only on stdout');

  const rotated = await admin(['access-key', 'rotate', '--config', config, '--name', 'p1']);
  assert.equal(rotated.code, 0, rotated.err);
  assert.doesNotMatch(rotated.err, /shown once/);
  assert.match(rotated.err, new RegExp(`new secret \\(stored in plain text in the keys file ${keys}`));
});

test('file mode with a hash secret: only the HMAC is in the file, so the secret is shown once', async () => {
  const { config, keys } = await fileMode('hashed', 'secret-messages-hash');
  const created = await admin(['access-key', 'create', '--config', config, '--name', 'h1']);
  assert.equal(created.code, 0, created.err);
  assert.equal((await readFile(keys, 'utf8')).includes(created.out.trim()), false);
  assert.match(created.err, new RegExp(`secret \\(shown once: the keys file ${keys} keeps only its HMAC`));
  const rotated = await admin(['access-key', 'rotate', '--config', config, '--name', 'h1']);
  assert.match(rotated.err, /new secret \(shown once: the keys file .* keeps only its HMAC/);
});

test('store mode: the store keeps only the HMAC, so the secret is shown once', async () => {
  const config = join(dir, 'store.yaml');
  await writeFile(
    config,
    [
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      '  key_prefix: "msg:"',
      '  access_key_hash_secret: secret-messages-hash',
      '  operation_timeout_ms: 200',
      '',
    ].join('\n'),
  );
  const created = await admin(['access-key', 'create', '--config', config, '--name', 's1']);
  assert.equal(created.code, 0, created.err);
  assert.match(
    created.err,
    /secret \(shown once: the store redis:\/\/127\.0\.0\.1:\d+ \(prefix msg:\) keeps only its HMAC/,
  );
  assert.doesNotMatch(created.err, /plain text/);
  const rotated = await admin(['access-key', 'rotate', '--config', config, '--name', 's1']);
  assert.match(rotated.err, /new secret \(shown once: the store /);
});

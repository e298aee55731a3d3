// Rotating the access-key hash secret in shared-store mode, end to end: a real redis-server, the upstream
// simulator, keys made by the real router-admin under secret A, and gateways on secret B: one with B
// only (in process), one with B and previous A from its file (a child process, so its re-hash reaches the
// other gateway's view cache through Redis itself) and one with previous A from the environment (in
// process). Steps run in order against the same store.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { runAdmin } from '../../../admin/cli.ts';
import { hashAccessKey, hashSecretId } from '../../../hooks/builtin/auth.ts';
import { type RunningGateway, startGateway } from '../../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../../sim/upstream/server.ts';
import {
  type ChildGateway,
  capturingLogger,
  type LogLine,
  spawnLogged,
  waitUntil,
} from '../../support/billing-stack.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';
import { MODELS_FILE, PRICING_FILE, PROVIDERS_DIR, simProviderEnv } from '../../support/stack.ts';

const SECRET_A = 'hash-secret-A-old-0123456789';
const SECRET_B = 'hash-secret-B-new-9876543210';
const PREFIX = 'rot:';
const INDEX = `${PREFIX}access_key:index`;

let redis: RedisServer;
let upstream: UpstreamSim;
let dir: string;
let env: Record<string, string>;
const configs: Record<'a' | 'b' | 'ba', string> = { a: '', b: '', ba: '' };
/** Current B only. */
let onlyB: RunningGateway;
/** Current B, previous A from its file; a child process. */
let withA: ChildGateway;
let childLog = '';
/** Current B, previous A from ROUTER_ACCESS_KEY_PREVIOUS_HASH_SECRET. */
let withAEnv: RunningGateway;
const logs: LogLine[] = [];
const presented: string[] = [];

async function writeConfig(name: string, storeLines: string[]): Promise<string> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(
    file,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      `pricing: ${PRICING_FILE}`,
      'log: { level: info }',
      'store:',
      '  enabled: true',
      `  addr: ${redis.url}`,
      `  key_prefix: "${PREFIX}"`,
      '  operation_timeout_ms: 500',
      // Long enough that a stale cached answer would still be served after the re-hash.
      '  view_cache_ms: 600000',
      ...storeLines.map((l) => `  ${l}`),
      '',
    ].join('\n'),
  );
  return file;
}

before(async () => {
  redis = await startRedis();
  upstream = await startUpstreamSim();
  dir = await mkdtemp(join(tmpdir(), 'router-hash-rotation-'));
  configs.a = await writeConfig('a', [`access_key_hash_secret: ${SECRET_A}`]);
  configs.b = await writeConfig('b', [`access_key_hash_secret: ${SECRET_B}`]);
  configs.ba = await writeConfig('ba', [
    `access_key_hash_secret: ${SECRET_B}`,
    `previous_access_key_hash_secret: ${SECRET_A}`,
  ]);
  env = simProviderEnv(upstream.url);
  onlyB = await startGateway(configs.b, { env, sidecar: false, logger: capturingLogger(logs) });
  withAEnv = await startGateway(configs.b, {
    env: { ...env, ROUTER_ACCESS_KEY_PREVIOUS_HASH_SECRET: SECRET_A },
    sidecar: false,
    logger: capturingLogger(logs),
  });
  withA = await spawnLogged('proxy/cli.ts', ['-c', configs.ba, '--no-sidecar'], env, 'router listening');
  withA.child.stdout?.on('data', (chunk: Buffer) => {
    childLog += chunk.toString('utf8');
  });
});

after(async () => {
  if (withA !== undefined && withA.child.exitCode === null) withA.child.kill('SIGTERM');
  await withA?.exited;
  await onlyB?.close();
  await withAEnv?.close();
  await upstream?.close();
  await redis?.close();
  await rm(dir, { recursive: true, force: true });
});

async function admin(config: string, ...argv: string[]): Promise<{ code: number; out: string }> {
  const chunks: string[] = [];
  const out = new Writable({
    write(c: Buffer, _e, done) {
      chunks.push(c.toString());
      done();
    },
  });
  const err = new Writable({ write: (_c, _e, done) => done() });
  const code = await runAdmin([...argv, '--config', config], { stdout: out, stderr: err });
  return { code, out: chunks.join('') };
}

async function createKey(config: string, name: string): Promise<string> {
  const created = await admin(config, 'access-key', 'create', '--name', name);
  assert.equal(created.code, 0);
  const secret = created.out.trim();
  presented.push(secret);
  return secret;
}

async function chat(
  url: string,
  key: string,
  requestId?: string,
): Promise<{ status: number; message: string }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      ...(requestId === undefined ? {} : { 'x-router-request-id': requestId }),
    },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  const body = (await res.json()) as { error?: { message?: string } };
  return { status: res.status, message: body.error?.message ?? '' };
}

/** The index entries naming `name`: exactly one per key in a consistent store. */
async function indexEntriesOf(name: string): Promise<string[]> {
  const index = await redis.admin.hgetall(INDEX);
  return Object.entries(index)
    .filter(([, n]) => n === name)
    .map(([hash]) => hash);
}

let barriers = 0;

/**
 * Move log lines for `name` in both gateways. The child's stdout is read asynchronously: a request logged
 * after the ones that matter, once seen, means every earlier line of that pipe has arrived.
 */
async function movedLogLines(name: string, key: string): Promise<number> {
  const id = `log-barrier-${++barriers}`;
  await chat(withA.url, key, id);
  await waitUntil(() => childLog.includes(id), 'the child gateway logged the barrier request');
  const inProcess = logs.filter((l) => l.msg?.includes('re-hashed') && l.accessKey === name).length;
  const child = childLog
    .split('\n')
    .filter((line) => line.includes('re-hashed') && line.includes(`"accessKey":"${name}"`)).length;
  return inProcess + child;
}

let movedKey = '';

test('a gateway with only the new secret refuses a key still under the old one', async () => {
  movedKey = await createKey(configs.a, 'moved-by-use');
  const refused = await chat(onlyB.url, movedKey);
  assert.equal(refused.status, 401);
  assert.deepEqual(await indexEntriesOf('moved-by-use'), [hashAccessKey(SECRET_A, movedKey)]);
  assert.equal(
    await redis.admin.hget(`${PREFIX}access_key:moved-by-use`, 'hash_secret_id'),
    hashSecretId(SECRET_A),
  );
});

test('with the old secret as previous the key is accepted and moved; then a new-secret-only gateway accepts it', async () => {
  assert.equal((await chat(withA.url, movedKey)).status, 200);
  assert.deepEqual(await indexEntriesOf('moved-by-use'), [hashAccessKey(SECRET_B, movedKey)]);
  const record = await redis.admin.hgetall(`${PREFIX}access_key:moved-by-use`);
  assert.equal(record.secret_hash, hashAccessKey(SECRET_B, movedKey));
  assert.equal(record.hash_secret_id, hashSecretId(SECRET_B));
  assert.equal(record.status, 'active');
  // onlyB cached "no such key" for the new hash in the first step; the move in another process drops it.
  assert.equal((await chat(onlyB.url, movedKey)).status, 200);
  assert.equal((await chat(withA.url, movedKey)).status, 200);
  assert.equal(await movedLogLines('moved-by-use', movedKey), 1);
});

test('a revoked key under the old secret stays refused and stays where it is', async () => {
  const key = await createKey(configs.a, 'revoked-old');
  assert.equal((await admin(configs.a, 'access-key', 'revoke', '--name', 'revoked-old')).code, 0);
  for (const url of [withA.url, withAEnv.url]) {
    const refused = await chat(url, key);
    assert.equal(refused.status, 401);
    assert.match(refused.message, /revoked/);
  }
  assert.deepEqual(await indexEntriesOf('revoked-old'), [hashAccessKey(SECRET_A, key)]);
  assert.equal(
    await redis.admin.hget(`${PREFIX}access_key:revoked-old`, 'secret_hash'),
    hashAccessKey(SECRET_A, key),
  );
});

test('two gateways moving the same key at once leave one consistent record', async () => {
  const key = await createKey(configs.a, 'raced');
  const replies = await Promise.all(
    Array.from({ length: 24 }, (_, i) => chat(i % 2 === 0 ? withA.url : withAEnv.url, key)),
  );
  assert.deepEqual(
    replies.map((r) => r.status),
    replies.map(() => 200),
  );
  assert.deepEqual(await indexEntriesOf('raced'), [hashAccessKey(SECRET_B, key)]);
  const record = await redis.admin.hgetall(`${PREFIX}access_key:raced`);
  assert.equal(record.secret_hash, hashAccessKey(SECRET_B, key));
  assert.equal(record.hash_secret_id, hashSecretId(SECRET_B));
  assert.equal(record.version, '1');
  assert.equal(await movedLogLines('raced', key), 1, 'exactly one request moved it');
  assert.equal((await chat(onlyB.url, key)).status, 200);
});

test('the previous-secret variable is a store setting, never an access key', async () => {
  const refused = await chat(withAEnv.url, SECRET_A);
  assert.equal(refused.status, 401);
});

test('a key already under the current secret costs one view read, as without a previous secret', async () => {
  const key = await createKey(configs.b, 'current-one');
  const monitor = await redis.monitor();
  assert.equal((await chat(withAEnv.url, key)).status, 200);
  const commands = await monitor.stop();
  assert.deepEqual(
    commands.map((c) => c[0]),
    ['evalsha'],
  );
});

test('a wrong key, refused once, costs Redis nothing when presented again during the window', async () => {
  const wrong = 'ak_wrong_key_never_created';
  presented.push(wrong);
  assert.equal((await chat(withAEnv.url, wrong)).status, 401);
  const monitor = await redis.monitor();
  assert.equal((await chat(withAEnv.url, wrong)).status, 401);
  assert.deepEqual(await monitor.stop(), []);
});

test('router-admin list counts the keys per hash secret', async () => {
  const listed = await admin(configs.ba, 'access-key', 'list');
  assert.equal(listed.code, 0);
  assert.match(listed.out, /hash secret: 3 current, 1 previous, 0 unknown\n$/);
});

test('neither hash secret nor any presented key reaches a log line', () => {
  const text = JSON.stringify(logs) + childLog;
  assert.ok(text.includes('re-hashed'), 'the logs were captured');
  for (const secret of [SECRET_A, SECRET_B, ...presented]) assert.equal(text.includes(secret), false);
});

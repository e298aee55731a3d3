import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { runAdmin } from '../../admin/cli.ts';
import { loadConfig } from '../../config/load.ts';
import { hashAccessKey } from '../../hooks/builtin/auth.ts';
import { type RedisServer, startRedis } from '../support/redis.ts';
import { ROOT } from '../support/stack.ts';

const HASH_SECRET = 'admin-test-hash-secret';
let redis: RedisServer;
let dir: string;

before(async () => {
  redis = await startRedis();
  dir = await mkdtemp(join(tmpdir(), 'router-admin-'));
});
after(async () => {
  await redis.close();
  await rm(dir, { recursive: true, force: true });
});

function sink(): { stream: Writable; text(): string } {
  const chunks: string[] = [];
  return {
    stream: new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk.toString());
        done();
      },
    }),
    text: () => chunks.join(''),
  };
}

async function admin(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out = sink();
  const err = sink();
  const code = await runAdmin(argv, { stdout: out.stream, stderr: err.stream });
  return { code, out: out.text(), err: err.text() };
}

async function storeConfig(name: string, prefix: string, addr = redis.url): Promise<string> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(
    file,
    [
      'store:',
      '  enabled: true',
      `  addr: ${addr}`,
      `  key_prefix: "${prefix}"`,
      `  access_key_hash_secret: ${HASH_SECRET}`,
      '  operation_timeout_ms: 200',
      '',
    ].join('\n'),
  );
  return file;
}

test('store mode: create prints the secret once and stores only its HMAC; list, rotate, revoke', async () => {
  const config = await storeConfig('store', 'adm1:');
  const created = await admin('access-key', 'create', '--config', config, '--name', 'client-a');
  assert.equal(created.code, 0, created.err);
  const secret = created.out.trim();
  assert.match(secret, /^ak_[A-Za-z0-9_-]{43}$/);
  assert.equal(created.err.includes(secret), false, 'the secret is printed once, on stdout');

  const record = await redis.admin.hgetall('adm1:access_key:client-a');
  assert.equal(record.secret_hash, hashAccessKey(HASH_SECRET, secret));
  assert.equal(record.subject_type, 'api_key');
  assert.equal(record.subject_id, 'client-a');
  const everything =
    JSON.stringify(await redis.admin.hgetall('adm1:access_key:index')) + JSON.stringify(record);
  assert.equal(everything.includes(secret), false, 'no plaintext in the store');

  const again = await admin('access-key', 'create', '--config', config, '--name', 'client-a');
  assert.equal(again.code, 1);
  assert.match(again.err, /already exists/);

  const team = await admin(
    'access-key',
    'create',
    '--config',
    config,
    '--name',
    'ci',
    '--subject-type',
    'team',
    '--subject-id',
    'team-x',
  );
  assert.equal(team.code, 0, team.err);

  const listed = await admin('access-key', 'list', '--config', config);
  assert.equal(listed.code, 0);
  const lines = listed.out.trim().split('\n');
  assert.match(lines[0]!, /^NAME\s+SUBJECT\s+STATUS\s+EXPIRES\s+CREATED\s+LIMITS\s+MODELS$/);
  assert.match(lines[1]!, /^ci\s+team:team-x\s+active\s+-\s+\d{4}-/);
  assert.match(lines[2]!, /^client-a\s+api_key:client-a\s+active/);
  assert.equal(listed.out.includes(secret), false);

  const rotated = await admin('access-key', 'rotate', '--config', config, '--name', 'client-a');
  assert.equal(rotated.code, 0, rotated.err);
  const newSecret = rotated.out.trim();
  assert.notEqual(newSecret, secret);
  assert.equal(
    await redis.admin.hget('adm1:access_key:client-a', 'secret_hash'),
    hashAccessKey(HASH_SECRET, newSecret),
  );
  assert.equal(await redis.admin.hget('adm1:access_key:index', hashAccessKey(HASH_SECRET, secret)), null);

  const revoked = await admin('access-key', 'revoke', '--config', config, '--name', 'client-a');
  assert.equal(revoked.code, 0);
  assert.equal(await redis.admin.hget('adm1:access_key:client-a', 'status'), 'revoked');
  const json = await admin('access-key', 'list', '--config', config, '--json');
  const keys = JSON.parse(json.out) as { name: string; status: string }[];
  assert.deepEqual(
    keys.map((k) => [k.name, k.status]),
    [
      ['ci', 'active'],
      ['client-a', 'revoked'],
    ],
  );
  assert.equal((await admin('access-key', 'revoke', '--config', config, '--name', 'nope')).code, 1);
  assert.equal((await admin('access-key', 'rotate', '--config', config, '--name', 'client-a')).code, 1);
});

test('store mode: migrate imports a keys file idempotently, reports conflicts, --dry-run writes nothing', async () => {
  const config = await storeConfig('migrate', 'adm2:');
  const keysFile = join(dir, 'old-keys.yaml');
  const hashed = hashAccessKey(HASH_SECRET, 'ak_hashed_one');
  await writeFile(
    keysFile,
    [
      'access_keys:',
      '  - name: alpha',
      '    value: ak_alpha_secret',
      '  - name: beta',
      `    hash: ${hashed}`,
      '    subject_type: team',
      '    subject_id: team-b',
      '  - name: gamma',
      '    value: ak_gamma_secret',
      '    status: revoked',
      '',
    ].join('\n'),
  );
  const dry = await admin('access-key', 'migrate', '--config', config, '--from', keysFile, '--dry-run');
  assert.equal(dry.code, 0, dry.err);
  assert.match(dry.out, /dry run: 3 would create, 0 unchanged, 0 conflicts/);
  assert.deepEqual(await redis.admin.keys('adm2:*'), []);

  const first = await admin('access-key', 'migrate', '--config', config, '--from', keysFile);
  assert.equal(first.code, 0, first.err);
  assert.match(first.out, /3 created, 0 unchanged, 0 conflicts/);
  assert.equal(
    await redis.admin.hget('adm2:access_key:index', hashAccessKey(HASH_SECRET, 'ak_alpha_secret')),
    'alpha',
  );
  assert.equal(await redis.admin.hget('adm2:access_key:beta', 'secret_hash'), hashed);
  assert.equal(await redis.admin.hget('adm2:access_key:beta', 'subject_id'), 'team-b');
  assert.equal(await redis.admin.hget('adm2:access_key:gamma', 'status'), 'revoked');

  const second = await admin('access-key', 'migrate', '--config', config, '--from', keysFile);
  assert.equal(second.code, 0);
  assert.match(second.out, /0 created, 3 unchanged, 0 conflicts/);

  await writeFile(keysFile, ['access_keys:', '  - name: alpha', '    value: ak_different', ''].join('\n'));
  const conflict = await admin('access-key', 'migrate', '--config', config, '--from', keysFile);
  assert.equal(conflict.code, 1);
  assert.match(conflict.out, /CONFLICT {2}alpha: a key of this name exists with a different secret/);
  assert.equal(
    await redis.admin.hget('adm2:access_key:alpha', 'secret_hash'),
    hashAccessKey(HASH_SECRET, 'ak_alpha_secret'),
    'a conflict changes nothing',
  );
});

test('store unreachable: a clear message and exit code 3', async () => {
  const config = await storeConfig('down', 'adm3:', 'redis://127.0.0.1:1');
  const result = await admin('access-key', 'list', '--config', config);
  assert.equal(result.code, 3);
  assert.match(
    result.err,
    /cannot connect to the store redis:\/\/127\.0\.0\.1:1 \(prefix adm3:\): connection refused \(ECONNREFUSED\); check store\.addr \(ROUTER_STORE_ADDR\).*; nothing was changed/,
  );
});

test('usage errors exit 2: bad config, bad name, missing option', async () => {
  assert.equal((await admin('access-key', 'list', '--config', join(dir, 'missing.yaml'))).code, 2);
  const config = await storeConfig('usage', 'adm4:');
  const bad = await admin('access-key', 'create', '--config', config, '--name', 'bad name!');
  assert.equal(bad.code, 2);
  assert.match(bad.err, /invalid --name/);
  const missing = await admin('access-key', 'create', '--config', config);
  assert.notEqual(missing.code, 0);
});

test('file mode: the commands edit the keys file, storing hashes when a hash secret is set', async () => {
  const keysFile = join(dir, 'keys.yaml');
  await writeFile(keysFile, 'access_keys: []\n');
  const config = join(dir, 'file-mode.yaml');
  await writeFile(
    config,
    ['keys: keys.yaml', 'store:', '  enabled: false', `  access_key_hash_secret: ${HASH_SECRET}`, ''].join(
      '\n',
    ),
  );
  const created = await admin('access-key', 'create', '--config', config, '--name', 'local');
  assert.equal(created.code, 0, created.err);
  const secret = created.out.trim();
  const text = await readFile(keysFile, 'utf8');
  assert.equal(text.includes(secret), false, 'no plaintext in the keys file');
  assert.match(text, new RegExp(`hash: ${hashAccessKey(HASH_SECRET, secret)}`));

  // The gateway's own loader accepts what was written, and the key authenticates by hash.
  const loaded = await loadConfig(config, { env: {} });
  assert.deepEqual(loaded.diagnostics, []);
  assert.equal(loaded.config?.keys.accessKeys[0]?.hash, hashAccessKey(HASH_SECRET, secret));

  assert.equal((await admin('access-key', 'revoke', '--config', config, '--name', 'local')).code, 0);
  const listed = await admin('access-key', 'list', '--config', config);
  assert.match(listed.out, /local\s+api_key:local\s+revoked/);
});

test('bin/router-admin.js runs and shows help with examples', () => {
  const result = spawnSync(
    process.execPath,
    [join(ROOT, 'bin/router-admin.js'), 'access-key', 'migrate', '--help'],
    {
      encoding: 'utf8',
    },
  );
  assert.equal(result.status, 0, result.stderr);
  assert.match(result.stdout, /--dry-run/);
  assert.match(result.stdout, /access-key migrate --config router.yaml --from keys.yaml/);
});

// Store connection failures are told apart and name their fix: unreachable (a closed port: the address,
// without credentials, and store.addr), authentication (a real redis-server started with --requirepass:
// ROUTER_STORE_PASSWORD / store.password), TLS verification (a real TLS redis-server with a self-signed
// certificate made by openssl, when this redis-server build has TLS: NODE_EXTRA_CA_CERTS, the host name).
// store-error-classification.test.ts checks the classification against the error shapes themselves.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { findRedisServer, freePort, type RedisServer, startRedis } from '../support/redis.ts';
import { admin, adminProcess } from './run-admin.ts';

const PASSWORD = 'admin-test-requirepass';
let dir: string;
let locked: { port: number; proc: ChildProcess } | undefined;

/** redis-server with --requirepass (test/support's startRedis keeps an unauthenticated admin connection). */
async function startLockedRedis(): Promise<{ port: number; proc: ChildProcess }> {
  const port = await freePort();
  const proc = spawn(
    findRedisServer(),
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--requirepass',
      PASSWORD,
    ],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  await new Promise<void>((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('Ready to accept connections')) resolve();
    });
    proc.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${out.slice(-300)}`)));
  });
  proc.stdout?.resume();
  return { port, proc };
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'router-admin-store-errors-'));
  locked = await startLockedRedis();
});
after(async () => {
  if (locked !== undefined && locked.proc.exitCode === null) {
    const exited = new Promise<void>((resolve) => locked?.proc.once('exit', () => resolve()));
    locked.proc.kill('SIGKILL');
    await exited;
  }
  await rm(dir, { recursive: true, force: true });
});

let configs = 0;
async function storeConfig(addr: string, extra: readonly string[] = []): Promise<string> {
  const file = join(dir, `store-${++configs}.yaml`);
  await writeFile(
    file,
    [
      'store:',
      '  enabled: true',
      `  addr: ${addr}`,
      '  access_key_hash_secret: store-errors-hash',
      '  operation_timeout_ms: 200',
      ...extra,
      '',
    ].join('\n'),
  );
  return file;
}

// --- real servers -----------------------------------------------------------------------------------

test('unreachable (a closed port): the address without credentials, store.addr, exit 3', async () => {
  const port = await freePort();
  const config = await storeConfig(`redis://someone:pa55word@127.0.0.1:${port}`);
  for (const argv of [
    ['access-key', 'list'],
    ['dead-letter', 'list'],
  ]) {
    const r = await admin([...argv, '--config', config]);
    assert.equal(r.code, 3, r.err);
    assert.match(
      r.err,
      new RegExp(
        `cannot connect to the store redis://127\\.0\\.0\\.1:${port} .*: connection refused \\(ECONNREFUSED\\); check store\\.addr \\(ROUTER_STORE_ADDR\\)`,
      ),
    );
    assert.equal(r.err.includes('pa55word'), false, 'no password');
    assert.equal(r.err.includes('someone'), false, 'no user');
  }
});

test('authentication (redis-server --requirepass): NOAUTH and WRONGPASS name ROUTER_STORE_PASSWORD, exit 2', async () => {
  const port = locked!.port;
  const none = await storeConfig(`redis://127.0.0.1:${port}`);
  const started = Date.now();
  const noauth = await admin(['access-key', 'list', '--config', none]);
  assert.equal(noauth.code, 2, noauth.err);
  assert.match(
    noauth.err,
    /the store redis:\/\/127\.0\.0\.1:\d+ \(prefix router:\) refused to authenticate router-admin: it requires a password and none was given \(NOAUTH\); set the password in ROUTER_STORE_PASSWORD \(or store\.password\)/,
  );
  assert.ok(Date.now() - started < 1800, 'a refused password is not waited out like an outage');

  const wrongUrl = await storeConfig(`redis://:not-the-password@127.0.0.1:${port}`);
  const wrong = await admin(['access-key', 'list', '--config', wrongUrl]);
  assert.equal(wrong.code, 2, wrong.err);
  assert.match(wrong.err, /\(WRONGPASS\); set the password in ROUTER_STORE_PASSWORD \(or store\.password\)/);
  assert.equal(wrong.err.includes('not-the-password'), false);

  const migrate = await admin([
    'store',
    'migrate',
    '--config',
    none,
    '--from',
    `redis://127.0.0.1:${port}`,
    '--dry-run',
  ]);
  assert.equal(migrate.code, 2);
  assert.match(migrate.err, /source store .*\(NOAUTH\); set the credentials in the --from URL/);

  const right = await storeConfig(`redis://127.0.0.1:${port}`, [`  password: ${PASSWORD}`]);
  const ok = await admin(['access-key', 'list', '--config', right]);
  assert.equal(ok.code, 0, ok.err);
});

/** Whether this redis-server was built with TLS, and openssl is there to make a certificate. */
function tlsUnavailable(): string | undefined {
  const openssl = spawnSync('openssl', ['version'], { encoding: 'utf8' });
  if (openssl.status !== 0) return 'openssl is not installed';
  const probe = spawnSync(findRedisServer(), ['--port', '0', '--tls-port', '0'], {
    encoding: 'utf8',
    timeout: 5000,
  });
  const said = `${probe.stdout}${probe.stderr}`;
  return /not listen anywhere/.test(said) ? undefined : 'this redis-server was built without TLS';
}

test('TLS verification (real TLS redis-server): untrusted issuer, wrong host name, then trusted', async (t) => {
  const missing = tlsUnavailable();
  if (missing !== undefined) {
    t.skip(`${missing}; store-error-classification.test.ts checks the TLS error shapes`);
    return;
  }
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=DNS:localhost',
    ],
    { encoding: 'utf8' },
  );
  assert.equal(made.status, 0, made.stderr);
  const tlsPort = await freePort();
  let redis: RedisServer | undefined;
  try {
    redis = await startRedis({
      extraArgs: [
        '--tls-port',
        String(tlsPort),
        '--tls-cert-file',
        cert,
        '--tls-key-file',
        key,
        '--tls-ca-cert-file',
        cert,
        '--tls-auth-clients',
        'no',
      ],
    });
    const env = { ...process.env, NODE_EXTRA_CA_CERTS: undefined };
    const byName = await storeConfig(`rediss://localhost:${tlsPort}`);
    const untrusted = await adminProcess(['access-key', 'list', '--config', byName], env);
    assert.equal(untrusted.code, 2, untrusted.err);
    assert.match(
      untrusted.err,
      new RegExp(
        `TLS verification of the store rediss://localhost:${tlsPort} .*failed: self-signed certificate \\(DEPTH_ZERO_SELF_SIGNED_CERT\\)\\. .*NODE_EXTRA_CA_CERTS=`,
      ),
    );

    const trusting = { ...env, NODE_EXTRA_CA_CERTS: cert };
    const byIp = await storeConfig(`rediss://127.0.0.1:${tlsPort}`);
    const wrongHost = await adminProcess(['access-key', 'list', '--config', byIp], trusting);
    assert.equal(wrongHost.code, 2, wrongHost.err);
    assert.match(
      wrongHost.err,
      /its certificate is not valid for the host 127\.0\.0\.1 \(ERR_TLS_CERT_ALTNAME_INVALID\); the certificate names DNS:localhost\. Address the store by a name the certificate holds in store\.addr/,
    );

    const ok = await adminProcess(['access-key', 'list', '--config', byName], trusting);
    assert.equal(ok.code, 0, ok.err);
    assert.match(ok.out, /^NAME\s+SUBJECT/);

    // A server that wants client certificates: its alert, or its close when that comes first, names them.
    await redis.admin.config('SET', 'tls-auth-clients', 'yes');
    const noClientCert = await adminProcess(['access-key', 'list', '--config', byName], trusting);
    assert.notEqual(noClientCert.code, 0, noClientCert.err);
    assert.match(noClientCert.err, /store\.tls_cert_file and store\.tls_key_file/);

    const plainToTls = await storeConfig(`redis://127.0.0.1:${tlsPort}`);
    const reset = await admin(['access-key', 'list', '--config', plainToTls]);
    assert.equal(reset.code, 3);
    assert.match(reset.err, /if the server expects TLS, use a rediss:\/\/ address or store\.tls: true/);
  } finally {
    await redis?.close();
  }
});

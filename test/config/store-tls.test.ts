// store.tls_ca_file, tls_cert_file and tls_key_file: resolved against the main file's folder, read once
// by the loader into the store block, and every mistake a diagnostic that names the key, the resolved
// path and the fix, never a file's contents. Certificates made by openssl.

import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { formatDiagnostic } from '../../common/config-diagnostics.ts';
import type { ConfigDiagnostic } from '../../common/config-types.ts';
import { loadConfig } from '../../config/load.ts';
import { makeTestCertificates, type TestCertificates } from '../support/redis.ts';
import { type TempDir, tempDir } from './temp-dir.ts';

let tmp: TempDir;
let certs: TestCertificates;

before(async () => {
  tmp = await tempDir();
  await mkdir(join(tmp.dir, 'tls'));
  certs = await makeTestCertificates(join(tmp.dir, 'tls'));
});
after(() => tmp.remove());

function messages(diagnostics: readonly ConfigDiagnostic[]): string[] {
  return diagnostics.map(formatDiagnostic);
}

/** Loads `conf/router.yaml` holding a store block with these extra lines (TLS on unless `addr` says). */
async function load(lines: readonly string[], env: Record<string, string> = {}) {
  await mkdir(join(tmp.dir, 'conf'), { recursive: true });
  const hasAddr = lines.some((line) => line.startsWith('addr:'));
  const file = await tmp.write(
    'conf/router.yaml',
    [
      'store:',
      '  enabled: true',
      '  access_key_hash_secret: h',
      ...(hasAddr ? [] : ['  addr: rediss://cache.internal:6380']),
      ...lines.map((line) => `  ${line}`),
      '',
    ].join('\n'),
  );
  return loadConfig(file, { env });
}

async function problems(lines: readonly string[], env: Record<string, string> = {}): Promise<string[]> {
  const { config, diagnostics } = await load(lines, env);
  assert.equal(config, undefined, 'a diagnostic means no configuration');
  return messages(diagnostics);
}

const FILES = [
  'tls_ca_file: ../tls/ca.pem',
  'tls_cert_file: ../tls/client.pem',
  'tls_key_file: ../tls/client-key.pem',
];

test('the files resolve against the main file folder and their contents reach the store block', async () => {
  const { config, diagnostics } = await load(FILES);
  assert.deepEqual(messages(diagnostics), []);
  const store = config!.store;
  assert.equal(store.tls, true);
  assert.deepEqual(store.tlsCa, await readFile(certs.caFile));
  assert.deepEqual(store.tlsCert, await readFile(certs.clientCertFile));
  assert.deepEqual(store.tlsKey, await readFile(certs.clientKeyFile));

  // The CA alone (a server that does not ask for client certificates), with store.tls and an absolute path.
  const caOnly = await load([
    'addr: redis://cache.internal:6379',
    'tls: true',
    `tls_ca_file: ${certs.caFile}`,
  ]);
  assert.deepEqual(messages(caOnly.diagnostics), []);
  assert.deepEqual(caOnly.config!.store.tlsCa, await readFile(certs.caFile));
  assert.equal(caOnly.config!.store.tlsCert, undefined);
  assert.equal(caOnly.config!.store.tlsKey, undefined);

  const none = await load([]);
  assert.deepEqual(messages(none.diagnostics), []);
  assert.equal(none.config!.store.tlsCa, undefined, "Node's default roots");
});

test('the ROUTER_STORE_TLS_* variables win over the file, relative to the main file folder too', async () => {
  const { config, diagnostics } = await load(['tls_ca_file: ../tls/missing.pem'], {
    ROUTER_STORE_TLS_CA_FILE: '../tls/ca.pem',
    ROUTER_STORE_TLS_CERT_FILE: '../tls/client.pem',
    ROUTER_STORE_TLS_KEY_FILE: certs.clientKeyFile,
  });
  assert.deepEqual(messages(diagnostics), []);
  assert.deepEqual(config!.store.tlsCa, await readFile(certs.caFile));
  assert.deepEqual(config!.store.tlsCert, await readFile(certs.clientCertFile));
  assert.deepEqual(config!.store.tlsKey, await readFile(certs.clientKeyFile));
  // Empty counts as unset: the file's value stays.
  const empty = await load(['tls_ca_file: ../tls/ca.pem'], { ROUTER_STORE_TLS_CA_FILE: '' });
  assert.deepEqual(messages(empty.diagnostics), []);
  assert.deepEqual(empty.config!.store.tlsCa, await readFile(certs.caFile));
});

test('a file that cannot be read names the key and the resolved path', async () => {
  const conf = join(tmp.dir, 'conf');
  assert.deepEqual(await problems(['tls_ca_file: nope/ca.pem']), [
    `${join(conf, 'router.yaml')}:5:16: store.tls_ca_file: cannot read ${join(conf, 'nope/ca.pem')}: file not found`,
  ]);
  assert.deepEqual(await problems(['tls_ca_file: ../tls']), [
    `${join(conf, 'router.yaml')}:5:16: store.tls_ca_file: cannot read ${join(tmp.dir, 'tls')}: it is a directory`,
  ]);
  // Set by a variable: the message names it.
  assert.deepEqual(
    await problems([...FILES.slice(0, 2), 'tls_key_file: ../tls/server-key.pem'], {
      ROUTER_STORE_TLS_KEY_FILE: 'gone.pem',
    }),
    [
      `${join(conf, 'router.yaml')}:0:0: store.tls_key_file: cannot read ${join(conf, 'gone.pem')}: file not found (store.tls_key_file set by environment variable ROUTER_STORE_TLS_KEY_FILE)`,
    ],
  );
});

test('a client certificate needs its key, and the key its certificate', async () => {
  const certOnly = await problems(FILES.slice(0, 2));
  assert.equal(certOnly.length, 1, certOnly.join('\n'));
  assert.match(
    certOnly[0]!,
    /:6:18: store\.tls_cert_file is set without store\.tls_key_file: a client certificate needs both \(set both, or neither\)$/,
  );
  const keyOnly = await problems(['tls_key_file: ../tls/client-key.pem']);
  assert.equal(keyOnly.length, 1, keyOnly.join('\n'));
  assert.match(keyOnly[0]!, /store\.tls_key_file is set without store\.tls_cert_file/);
  const fromEnv = await problems([], { ROUTER_STORE_TLS_CERT_FILE: certs.clientCertFile });
  assert.match(
    fromEnv.join('\n'),
    /store\.tls_cert_file is set without store\.tls_key_file.*\(store\.tls_cert_file set by environment variable ROUTER_STORE_TLS_CERT_FILE\)/,
  );
});

test('the files need TLS on: store.tls or a rediss:// address', async () => {
  const off = await problems(['addr: redis://cache.internal:6379', ...FILES]);
  assert.deepEqual(
    off.map((line) => line.replace(/^.*?: /, '')),
    ['tls_ca_file', 'tls_cert_file', 'tls_key_file'].map(
      (key) => `store.${key} is set but TLS is off: set store.tls: true or use a rediss:// address`,
    ),
  );
  // The first seed decides for a cluster, as it does for the connection.
  const seeds = await load(['cluster: true', 'addr: rediss://a:6379,rediss://b:6379', ...FILES]);
  assert.deepEqual(messages(seeds.diagnostics), []);
  const sentinels = await load(['sentinels: ["s1:26379"]', 'tls: true', ...FILES]);
  assert.deepEqual(messages(sentinels.diagnostics), []);
});

test('a file without the PEM block it should hold is refused, naming what was expected', async () => {
  await tmp.write('tls/empty.pem', 'not a certificate\n');
  const conf = join(tmp.dir, 'conf');
  const noPem = await problems(['tls_ca_file: ../tls/empty.pem']);
  assert.deepEqual(noPem, [
    `${join(conf, 'router.yaml')}:5:16: store.tls_ca_file: ${join(tmp.dir, 'tls/empty.pem')} holds no PEM certificate (no "-----BEGIN CERTIFICATE-----" block)`,
  ]);
  // The key where the certificate belongs and the other way round.
  const swapped = await problems(['tls_cert_file: ../tls/client-key.pem', 'tls_key_file: ../tls/client.pem']);
  assert.deepEqual(
    swapped.map((line) => line.replace(/^.*?: /, '')),
    [
      `store.tls_cert_file: ${certs.clientKeyFile} holds no PEM certificate (no "-----BEGIN CERTIFICATE-----" block)`,
      `store.tls_key_file: ${certs.clientCertFile} holds no PEM private key (no "-----BEGIN PRIVATE KEY-----" block)`,
    ],
  );
  await tmp.write(
    'tls/broken.pem',
    '-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n',
  );
  const broken = await problems(['tls_ca_file: ../tls/broken.pem']);
  assert.equal(broken.length, 1, broken.join('\n'));
  assert.match(
    broken[0]!,
    /store\.tls_ca_file: \S+broken\.pem holds a certificate that cannot be parsed \(block 1: /,
  );
});

test('a key that is not the certificate’s, or is encrypted, is refused without showing it', async () => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const other = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  await tmp.write('tls/other-key.pem', other);
  const mismatch = await problems([...FILES.slice(0, 2), 'tls_key_file: ../tls/other-key.pem']);
  assert.equal(mismatch.length, 1, mismatch.join('\n'));
  assert.match(
    mismatch[0]!,
    /:7:17: store\.tls_key_file \(\S+other-key\.pem\) cannot be used with store\.tls_cert_file \(\S+client\.pem\): key values mismatch/,
  );
  const encrypted = privateKey.export({
    type: 'pkcs8',
    format: 'pem',
    cipher: 'aes-256-cbc',
    passphrase: 'pass',
  }) as string;
  await tmp.write('tls/encrypted-key.pem', encrypted);
  const locked = await problems([...FILES.slice(0, 2), 'tls_key_file: ../tls/encrypted-key.pem']);
  assert.equal(locked.length, 1, locked.join('\n'));
  assert.match(locked[0]!, /store\.tls_key_file: \S+encrypted-key\.pem holds an encrypted private key/);
  const keyText = await readFile(certs.clientKeyFile, 'utf8');
  for (const line of [...mismatch, ...locked]) {
    for (const secret of [other, encrypted, keyText]) {
      const body = secret.split('\n')[1]!;
      assert.ok(!line.includes(body), `key material in: ${line}`);
    }
  }
});

test('with the store off the files are neither checked nor read', async () => {
  await mkdir(join(tmp.dir, 'conf'), { recursive: true });
  const file = await tmp.write(
    'conf/off.yaml',
    'store:\n  enabled: false\n  tls_ca_file: missing.pem\n  tls_cert_file: ../tls/client.pem\n',
  );
  const { config, diagnostics } = await loadConfig(file, { env: {} });
  assert.deepEqual(messages(diagnostics), []);
  assert.equal(config!.store.tlsCa, undefined);
  assert.equal(config!.store.tlsCert, undefined);
});

test('an empty path is a schema error', async () => {
  const found = await problems(['tls_ca_file: ""']);
  assert.equal(found.length, 1, found.join('\n'));
  assert.match(found[0]!, /store\.tls_ca_file must NOT have fewer than 1 characters/);
});

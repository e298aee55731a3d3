// The store over TLS against a real redis-server that requires client certificates (tls-auth-clients
// yes): a throwaway CA, server and client certificates made by openssl, the `store` block compiled by the
// configuration loader (tls_ca_file, tls_cert_file, tls_key_file, relative to the configuration's
// folder), and the connections the project makes from it: one endpoint, a one-node Redis Cluster, and a
// primary named by a Sentinel.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { StoreConfig } from '../../common/config-types.ts';
import { loadConfig } from '../../config/load.ts';
import { hashAccessKey } from '../../hooks/builtin/auth.ts';
import { closeRedisClient, createRedisClient, type Redis, waitReady } from '../../store/redis-client.ts';
import { openRedisStores } from '../../store/redis-store.ts';
import {
  freePort,
  makeTestCertificates,
  type RedisServer,
  type RedisTls,
  startRedis,
  type TestCertificates,
  testKeyRecord,
} from '../support/redis.ts';
import { spawnSentinel } from '../support/redis-sentinel.ts';

let dir: string;
let certs: TestCertificates;
let tls: RedisTls;
let redis: RedisServer;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'router-redis-tls-'));
  certs = await makeTestCertificates(dir);
  tls = {
    certFile: certs.serverCertFile,
    keyFile: certs.serverKeyFile,
    caFile: certs.caFile,
    authClients: true,
    client: {
      ca: await readFile(certs.caFile),
      cert: await readFile(certs.clientCertFile),
      key: await readFile(certs.clientKeyFile),
    },
  };
  redis = await startRedis({ tls });
});
after(async () => {
  await redis?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The store block of `router-<name>.yaml` in the certificates' folder, as the loader compiles it. */
async function storeConfig(name: string, lines: readonly string[], env: Record<string, string> = {}) {
  const file = join(dir, `router-${name}.yaml`);
  await writeFile(
    file,
    [
      'store:',
      '  enabled: true',
      `  key_prefix: "${name}:"`,
      '  access_key_hash_secret: test-hash-secret',
      ...lines.map((line) => `  ${line}`),
      '',
    ].join('\n'),
  );
  const { config, diagnostics } = await loadConfig(file, { env });
  assert.deepEqual(diagnostics, []);
  assert.ok(config);
  return config.store;
}

const WITH_CA_AND_CERT = [
  'tls_ca_file: ca.pem',
  'tls_cert_file: ./client.pem',
  'tls_key_file: client-key.pem',
] as const;

/** The first error of a client made from `store`, which must not have become ready before it. */
async function firstError(store: StoreConfig): Promise<{ error: NodeJS.ErrnoException; client: Redis }> {
  const client = createRedisClient(store);
  let ready = false;
  client.once('ready', () => {
    ready = true;
  });
  const [error] = (await once(client, 'error')) as [NodeJS.ErrnoException];
  assert.equal(ready, false, 'the client must not get ready');
  return { error, client };
}

test('with tls_ca_file and a client certificate the store answers over TLS', async () => {
  const store = await storeConfig('full', [`addr: rediss://localhost:${redis.port}`, ...WITH_CA_AND_CERT]);
  assert.equal(store.tls, true);
  assert.deepEqual(store.tlsCa, await readFile(certs.caFile));
  assert.deepEqual(store.tlsCert, await readFile(certs.clientCertFile));
  assert.deepEqual(store.tlsKey, await readFile(certs.clientKeyFile));
  // With the view cache: its tracking connection is a second TLS client made from the same block.
  const stores = await openRedisStores(store, { viewCacheMs: 2000 });
  try {
    assert.equal(stores.connected, true);
    assert.equal(await stores.client.ping(), 'PONG');
    assert.equal(await stores.accessKeys.create(testKeyRecord('tls-client', 'ak_tls')), 'created');
    const view = await stores.state.view({ keyHash: hashAccessKey('test-hash-secret', 'ak_tls') });
    assert.equal(view.key?.name, 'tls-client');
    assert.ok(await redis.admin.exists('full:access_key:tls-client'), 'written to the TLS server');
  } finally {
    await stores.close();
  }
});

test("without tls_ca_file the server's certificate fails verification against Node's default roots", async () => {
  const store = await storeConfig('no-ca', [
    `addr: rediss://localhost:${redis.port}`,
    'tls_cert_file: client.pem',
    'tls_key_file: client-key.pem',
  ]);
  assert.equal(store.tlsCa, undefined);
  const { error, client } = await firstError(store);
  client.disconnect();
  assert.match(
    String(error.code),
    /^(SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|UNABLE_TO_VERIFY_LEAF_SIGNATURE)$/,
    error.message,
  );
});

test('without a client certificate the server refuses the connection', async () => {
  const store = await storeConfig('no-cert', [
    `addr: rediss://127.0.0.1:${redis.port}`,
    'tls_ca_file: ca.pem',
  ]);
  assert.equal(store.tlsCert, undefined);
  const refused = redis.logged(/peer did not return a certificate/);
  const { error, client } = await firstError(store);
  client.disconnect();
  await refused;
  // The client verified the server and sent its first command; the server then closed the connection.
  assert.match(`${error.code} ${error.message}`, /ECONNRESET|EPIPE|CERTIFICATE_REQUIRED/);
});

test('the ROUTER_STORE_TLS_* variables name the files, relative to the configuration folder', async () => {
  const store = await storeConfig('env', [`addr: rediss://localhost:${redis.port}`], {
    ROUTER_STORE_TLS_CA_FILE: 'ca.pem',
    ROUTER_STORE_TLS_CERT_FILE: 'client.pem',
    ROUTER_STORE_TLS_KEY_FILE: certs.clientKeyFile,
  });
  const client = createRedisClient(store);
  try {
    assert.equal(await waitReady(client, 5000), true);
    assert.equal(await client.ping(), 'PONG');
  } finally {
    await closeRedisClient(client);
  }
});

test('a Redis Cluster client gives every node the CA and the client certificate', async () => {
  const node = await startRedis({
    tls,
    extraArgs: [
      '--cluster-enabled',
      'yes',
      // Alone, a node knows no address of its own to put in CLUSTER SLOTS.
      '--cluster-announce-ip',
      '127.0.0.1',
      '--tls-cluster',
      'yes',
      '--cluster-port',
      String(await freePort()),
    ],
  });
  try {
    await node.admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    const store = await storeConfig('cluster', [
      'cluster: true',
      `addr: rediss://localhost:${node.port}`,
      ...WITH_CA_AND_CERT,
    ]);
    const client = createRedisClient(store);
    try {
      // Ready once the slot map is read and the node reports cluster_state:ok, over TLS.
      assert.equal(await waitReady(client, 10_000), true);
      await client.set('cluster:{state}probe', 'over-tls');
      assert.equal(await node.admin.get('cluster:{state}probe'), 'over-tls');
    } finally {
      await closeRedisClient(client);
    }
  } finally {
    await node.close();
  }
});

test('a primary named by a Sentinel is reached over TLS with the CA and the client certificate', async () => {
  const sentinel = await startSentinel(redis.port);
  try {
    // No address: with sentinels it gives only credentials, database and TLS (here store.tls).
    const store = await storeConfig('sentinel', [
      `sentinels: ["127.0.0.1:${sentinel.port}"]`,
      'tls: true',
      ...WITH_CA_AND_CERT,
    ]);
    const client = createRedisClient(store);
    try {
      assert.equal(await waitReady(client, 5000), true);
      await client.set('sentinel:probe', 'over-tls');
      assert.equal(await redis.admin.get('sentinel:probe'), 'over-tls');
    } finally {
      await closeRedisClient(client);
    }
  } finally {
    await sentinel.close();
  }
});

/** A Sentinel on a plain port monitoring the TLS primary (its own link to it uses the client certificate). */
async function startSentinel(primaryPort: number): Promise<{ port: number; close(): Promise<void> }> {
  const sentinelDir = await mkdtemp(join(tmpdir(), 'router-tls-sentinel-'));
  const port = await freePort();
  const conf = join(sentinelDir, 'sentinel.conf');
  await writeFile(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      'protected-mode no',
      `dir ${sentinelDir}`,
      'tls-replication yes',
      `tls-cert-file ${certs.clientCertFile}`,
      `tls-key-file ${certs.clientKeyFile}`,
      `tls-ca-cert-file ${certs.caFile}`,
      `sentinel monitor mymaster 127.0.0.1 ${primaryPort} 1`,
      '',
    ].join('\n'),
  );
  const child = await spawnSentinel(conf);
  return {
    port,
    async close() {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
      await rm(sentinelDir, { recursive: true, force: true });
    },
  };
}

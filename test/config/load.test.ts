// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${ENV}` in plain strings is the configuration syntax under test.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { availableParallelism, homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { formatDiagnostic } from '../../common/config-diagnostics.ts';
import type { ConfigDiagnostic } from '../../common/config-types.ts';
import { ENV_OVERRIDES } from '../../config/env-overrides.ts';
import { loadConfig, loadConfigFromString } from '../../config/load.ts';
import { makeTestCertificates } from '../support/redis.ts';
import { tempDir } from './temp-dir.ts';

const REFERENCE = resolve(import.meta.dirname, '../../deploy/config/router.yaml');

function messages(diagnostics: readonly ConfigDiagnostic[]): string[] {
  return diagnostics.map(formatDiagnostic);
}

/** Loads YAML text as if it were /virtual/router.yaml (no companion files). */
async function loadText(text: string, env: Record<string, string> = {}) {
  return loadConfigFromString(text, '/virtual/router.yaml', { env });
}

function only(diagnostics: readonly ConfigDiagnostic[]): ConfigDiagnostic {
  assert.equal(diagnostics.length, 1, messages(diagnostics).join('\n'));
  return diagnostics[0]!;
}

test('the reference configuration loads with an empty environment', async () => {
  const { config, diagnostics } = await loadConfig(REFERENCE, { env: {} });
  assert.deepEqual(messages(diagnostics), []);
  assert.ok(config);
  const dir = resolve(import.meta.dirname, '../../deploy/config');
  assert.equal(config.file, REFERENCE);
  assert.deepEqual(config.listen, { host: '127.0.0.1', port: 8080 });
  assert.equal(config.providersDir, join(dir, 'providers'));
  assert.equal(config.models.file, join(dir, 'models.yaml'));
  assert.ok(config.models.entries.some((entry) => entry.id === 'gpt-5.5' && entry.ownedBy === 'openai'));
  assert.equal(config.keys.file, undefined);
  assert.deepEqual(config.keys.accessKeys, []);
  assert.equal(config.billing.enabled, false);
  // File-mode data never lands in the checkout (deploy/config/data/ used to).
  assert.equal(config.billing.outboxDir, join(homedir(), '.local/state/llm-router/outbox'));
  assert.equal(config.billing.stateDir, join(homedir(), '.local/state/llm-router/state'));
  assert.deepEqual(config.billing.listen, { host: '127.0.0.1', port: 8081 });
  assert.equal(config.store.enabled, false);
  assert.equal(config.masterKey, undefined);
  assert.deepEqual(config.rateLimits, {
    perKey: {},
    perSubject: {},
    failureMode: 'open',
    leaseMs: 30_000,
    subjects: new Map(),
  });
});

test('data directories default to $XDG_STATE_HOME/llm-router, else $HOME/.local/state/llm-router', async () => {
  const xdg = (await loadText('', { XDG_STATE_HOME: '/srv/state', HOME: '/home/op' })).config?.billing;
  assert.deepEqual(
    [xdg?.outboxDir, xdg?.stateDir],
    ['/srv/state/llm-router/outbox', '/srv/state/llm-router/state'],
  );
  // A relative XDG_STATE_HOME is ignored, as the XDG rules say.
  const home = (await loadText('', { XDG_STATE_HOME: 'rel', HOME: '/home/op' })).config?.billing;
  assert.equal(home?.outboxDir, '/home/op/.local/state/llm-router/outbox');
  // Set in the file, a relative path still resolves against the file's folder.
  const set = (await loadText('billing:\n  outbox_dir: ./ob\n  state_dir: /abs/st\n', { HOME: '/h' })).config
    ?.billing;
  assert.deepEqual([set?.outboxDir, set?.stateDir], ['/virtual/ob', '/abs/st']);
});

test('an empty file gets every documented default', async () => {
  const { config, diagnostics } = await loadText('');
  assert.deepEqual(messages(diagnostics), []);
  assert.ok(config);
  assert.deepEqual(config.listen, { host: '127.0.0.1', port: 8080 });
  assert.equal(config.providersDir, '/virtual/providers');
  assert.deepEqual(config.limits, {
    maxBodyBytes: 10 * 1024 * 1024,
    upstreamConnectTimeoutMs: 5000,
    upstreamHeadersTimeoutMs: 60000,
    upstreamBodyTimeoutMs: 300000,
    maxRetries: 1,
    earlyCountWaitMs: 1000,
    realtimeMaxSessionS: 0,
    realtimeMaxMessageBytes: 16 * 1024 * 1024,
    drainTimeoutMs: 30000,
    clientHeaderTimeoutMs: 30000,
    clientBodyTimeoutMs: 30000,
    keepAliveTimeoutMs: 65000,
    maxConnections: 20000,
    maxHeaderBytes: 16384,
    maxJsonDepth: 128,
  });
  assert.equal(config.log.level, 'info');
  assert.deepEqual(config.hooks, []);
  assert.equal(config.sidecar.enabled, true);
  assert.deepEqual(config.billing, {
    enabled: false,
    baseUrl: '',
    projectId: '',
    apiKey: '',
    readApiKey: '',
    extractorRuleSetId: '',
    source: 'router',
    outboxDir: join(homedir(), '.local/state/llm-router/outbox'),
    outboxFsyncIntervalMs: 100,
    stateDir: join(homedir(), '.local/state/llm-router/state'),
    requestTimeoutMs: 3000,
    retryIntervalMs: 1000,
    maxRetryIntervalMs: 60000,
    deliveryLingerMs: 20,
    maxAttempts: 10,
    ledgerRetentionH: 72,
    onlyBillableSuccess: false,
    itemDetail: 'spec',
    interruptedStream: 'bill_delivered',
    interruptedStreamMaxMs: 30000,
    subjectType: 'api_key',
    fallbackSubjectId: '',
    listen: { host: '127.0.0.1', port: 8081 },
    balanceEnforcement: {
      enabled: false,
      currency: 'USD',
      failureMode: 'closed',
      requestTimeoutMs: 1000,
      webhookPath: '/internal/billing/webhook',
      webhookSecret: '',
      timestampToleranceS: 300,
      cacheTtlMs: 5000,
      deniedCacheTtlMs: 1000,
      webhookMaxBodyBytes: 1048576,
    },
  });
  assert.deepEqual(config.store, {
    enabled: false,
    addr: '',
    cluster: false,
    billingStreamShards: 1,
    sentinels: [],
    sentinelName: 'mymaster',
    sentinelPassword: undefined,
    username: undefined,
    password: undefined,
    tls: false,
    keyPrefix: 'router:',
    operationTimeoutMs: 500,
    viewCacheMs: 2000,
    accessKeyMode: 'redis_preferred',
    billingStream: 'billing:events',
    billingConsumerGroup: 'router-billing',
    billingConsumerName: '',
    billingMaxAttempts: 10,
    billingWaitReplicas: 0,
    accessKeyHashSecret: '',
    previousAccessKeyHashSecret: '',
    reclaimIdleMs: 30000,
  });
  assert.deepEqual(config.pricing.files, []);
  assert.deepEqual(config.models, { file: undefined, entries: [] });
});

const FULL_ENV: Record<string, string> = {
  ROUTER_BILLING_ENABLED: 'true',
  ROUTER_BILLING_BASE_URL: 'https://billing.example/',
  ROUTER_BILLING_PROJECT_ID: 'proj_1',
  ROUTER_BILLING_API_KEY: 'billing-api-key',
  ROUTER_BILLING_EXTRACTOR_RULE_SET_ID: 'ers_1',
  ROUTER_BILLING_READ_API_KEY: 'billing-read-key',
  ROUTER_BILLING_LEDGER_RETENTION_H: '24',
  ROUTER_BILLING_BALANCE_ENABLED: '1',
  ROUTER_BILLING_BALANCE_CURRENCY: 'EUR',
  ROUTER_BILLING_BALANCE_FAILURE_MODE: 'open',
  ROUTER_BILLING_BALANCE_REQUEST_TIMEOUT_MS: '250',
  ROUTER_BILLING_WEBHOOK_PATH: '/hooks/billing',
  ROUTER_BILLING_WEBHOOK_SECRET: 'whsec',
  ROUTER_STORE_ENABLED: 'TRUE',
  ROUTER_STORE_ADDR: 'rediss://cache.internal:6380',
  ROUTER_STORE_PASSWORD: 'store-password',
  ROUTER_ACCESS_KEY_HASH_SECRET: 'hash-secret',
  ROUTER_BILLING_OUTBOX_DIR: '/var/lib/router/outbox',
  ROUTER_BILLING_OUTBOX_FSYNC_INTERVAL_MS: '250',
  ROUTER_BILLING_STATE_DIR: '/var/lib/router/state',
  ROUTER_BILLING_LISTEN: '0.0.0.0:9091',
  ROUTER_LISTEN: '[::]:9090',
  ROUTER_MASTER_KEY: 'master',
  ROUTER_LOG_LEVEL: 'debug',
  ROUTER_STORE_USERNAME: 'router',
  ROUTER_STORE_SENTINELS: ' sentinel-a:26379, sentinel-b:26380 ',
  ROUTER_STORE_SENTINEL_NAME: 'primary-1',
  ROUTER_STORE_SENTINEL_PASSWORD: 'sentinel-password',
  ROUTER_STORE_KEY_PREFIX: 'prod:',
  ROUTER_STORE_TLS_CA_FILE: 'ca.pem',
  ROUTER_STORE_TLS_CERT_FILE: 'client.pem',
  ROUTER_STORE_TLS_KEY_FILE: 'client-key.pem',
  ROUTER_ACCESS_KEY_PREVIOUS_HASH_SECRET: 'old-hash-secret',
  ROUTER_WORKERS: '3',
  ROUTER_STORE_CLUSTER: '0',
  ROUTER_STORE_BILLING_STREAM_SHARDS: '4',
  OTEL_TRACES_EXPORTER: 'otlp',
  OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/v1/traces',
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
  OTEL_EXPORTER_OTLP_HEADERS: 'x-team=ai,authorization=Bearer%20general',
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'authorization=Bearer%20traces',
  OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
  OTEL_TRACES_SAMPLER_ARG: '0.25',
  OTEL_BSP_SCHEDULE_DELAY: '1000',
  OTEL_SERVICE_NAME: 'gateway-eu',
  OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,service.namespace=ai',
};

test('every ROUTER_* and OTEL_* override reaches the configuration and wins over the file', async (t) => {
  assert.deepEqual(
    Object.keys(FULL_ENV).sort(),
    ENV_OVERRIDES.map((o) => o.name).sort(),
    'test covers every variable',
  );
  const file = [
    'listen: 127.0.0.1:1000',
    'master_key: file-master',
    'log: { level: warn }',
    'billing:',
    '  enabled: false',
    '  base_url: http://file.example',
    '  listen: 127.0.0.1:1001',
    '  balance_enforcement: { currency: GBP, failure_mode: closed, request_timeout_ms: 5 }',
    'store: { enabled: false, addr: redis://file:6379, key_prefix: "file:", cluster: true }',
    'workers: 1',
    'telemetry: { traces: { service_name: file-name, headers: { x-team: file, x-file: kept } } }',
  ].join('\n');
  // The store's TLS files are read, relative to the main file's folder.
  const tmp = await tempDir();
  t.after(() => tmp.remove());
  const certs = await makeTestCertificates(tmp.dir);
  const { config, diagnostics } = await loadConfigFromString(file, join(tmp.dir, 'router.yaml'), {
    env: FULL_ENV,
  });
  assert.deepEqual(messages(diagnostics), []);
  assert.ok(config);
  assert.deepEqual(config.listen, { host: '::', port: 9090 });
  assert.equal(config.masterKey, 'master');
  assert.equal(config.log.level, 'debug');
  const billing = config.billing;
  assert.equal(billing.enabled, true);
  assert.equal(billing.baseUrl, 'https://billing.example');
  assert.equal(billing.projectId, 'proj_1');
  assert.equal(billing.apiKey, 'billing-api-key');
  assert.equal(billing.extractorRuleSetId, 'ers_1');
  assert.equal(billing.readApiKey, 'billing-read-key');
  assert.equal(billing.ledgerRetentionH, 24);
  assert.equal(billing.outboxDir, '/var/lib/router/outbox');
  assert.equal(billing.outboxFsyncIntervalMs, 250);
  assert.equal(billing.stateDir, '/var/lib/router/state');
  assert.deepEqual(billing.listen, { host: '0.0.0.0', port: 9091 });
  const balance = billing.balanceEnforcement;
  assert.equal(balance.enabled, true);
  assert.equal(balance.currency, 'EUR');
  assert.equal(balance.failureMode, 'open');
  assert.equal(balance.requestTimeoutMs, 250);
  assert.equal(balance.webhookPath, '/hooks/billing');
  assert.equal(balance.webhookSecret, 'whsec');
  const store = config.store;
  assert.equal(store.enabled, true);
  assert.equal(store.addr, 'rediss://cache.internal:6380');
  assert.equal(store.cluster, false);
  assert.equal(store.billingStreamShards, 4);
  assert.equal(config.workers, 3);
  assert.equal(store.tls, true, 'rediss:// implies TLS');
  assert.equal(store.username, 'router');
  assert.deepEqual(store.sentinels, [
    { host: 'sentinel-a', port: 26379 },
    { host: 'sentinel-b', port: 26380 },
  ]);
  assert.equal(store.sentinelName, 'primary-1');
  assert.equal(store.sentinelPassword, 'sentinel-password');
  assert.equal(store.password, 'store-password');
  assert.equal(store.keyPrefix, 'prod:');
  assert.deepEqual(store.tlsCa, await readFile(certs.caFile));
  assert.deepEqual(store.tlsCert, await readFile(certs.clientCertFile));
  assert.deepEqual(store.tlsKey, await readFile(certs.clientKeyFile));
  assert.equal(store.accessKeyHashSecret, 'hash-secret');
  assert.equal(store.previousAccessKeyHashSecret, 'old-hash-secret');
  assert.deepEqual(config.keys.accessKeys, [], 'the hash-secret variables define no access key');
  assert.deepEqual(config.telemetry.traces, {
    url: 'https://traces.example/v1/traces',
    protocol: 'http/json',
    headers: { 'x-team': 'ai', 'x-file': 'kept', authorization: 'Bearer traces' },
    sampler: 'parentbased_traceidratio',
    samplerArg: 0.25,
    exportDelayMs: 1000,
    serviceName: 'gateway-eu',
    resourceAttributes: { 'deployment.environment.name': 'prod', 'service.namespace': 'ai' },
  });
});

test('telemetry.traces: off by default; an endpoint turns it on; exporter none turns it off', async () => {
  const url = async (text: string, env: Record<string, string> = {}) =>
    (await loadText(text, env)).config?.telemetry.traces.url;
  assert.equal(await url(''), undefined);
  assert.equal(await url('telemetry: { traces: { endpoint: "http://c:4318/" } }'), 'http://c:4318/v1/traces');
  assert.equal(await url('', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), 'http://c:4318/v1/traces');
  assert.equal(await url('', { OTEL_TRACES_EXPORTER: 'otlp' }), 'http://localhost:4318/v1/traces');
  assert.equal(
    await url('', { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
    undefined,
  );
});

test('telemetry mistakes name the variable or key and the fix, never a header value', async () => {
  const problems = async (text: string, env: Record<string, string>) =>
    messages((await loadText(text, env)).diagnostics).join('\n');
  assert.match(await problems('', { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), /OTEL_EXPORTER_OTLP_PROTOCOL/);
  assert.match(
    await problems('', { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317' }),
    /http:\/\/ or https:\/\/ URL .*gRPC is not supported.*OTEL_EXPORTER_OTLP_ENDPOINT/,
  );
  const headers = await problems('', { OTEL_EXPORTER_OTLP_HEADERS: 'authorization: Bearer s3cret-token' });
  assert.match(headers, /OTEL_EXPORTER_OTLP_HEADERS must be a list of key=value pairs/);
  assert.doesNotMatch(headers, /s3cret-token/);
  assert.match(
    await problems('', { OTEL_TRACES_SAMPLER_ARG: 'half' }),
    /OTEL_TRACES_SAMPLER_ARG must be a number/,
  );
});

test('an empty environment variable counts as unset', async () => {
  const { config } = await loadText('listen: 127.0.0.1:7000\n', {
    ROUTER_LISTEN: '',
    ROUTER_STORE_ENABLED: '',
  });
  assert.deepEqual(config?.listen, { host: '127.0.0.1', port: 7000 });
  assert.equal(config?.store.enabled, false);
});

test('malformed boolean and integer variables are diagnostics naming the variable, not the value', async () => {
  const { config, diagnostics } = await loadText('', {
    ROUTER_BILLING_ENABLED: 'yes-please',
    ROUTER_BILLING_BALANCE_REQUEST_TIMEOUT_MS: '12s3cret',
  });
  assert.equal(config, undefined);
  const text = messages(diagnostics).join('\n');
  assert.match(text, /ROUTER_BILLING_ENABLED must be true, false, 1 or 0/);
  assert.match(text, /ROUTER_BILLING_BALANCE_REQUEST_TIMEOUT_MS must be a non-negative integer/);
  assert.doesNotMatch(text, /yes-please|12s3cret/);
});

test('an override with a value the schema refuses names the variable', async () => {
  const { diagnostics } = await loadText('', { ROUTER_BILLING_BALANCE_FAILURE_MODE: 'sometimes' });
  const diagnostic = only(diagnostics);
  assert.equal(diagnostic.line, 0);
  assert.match(diagnostic.message, /failure_mode must be one of: closed, open/);
  assert.match(diagnostic.message, /ROUTER_BILLING_BALANCE_FAILURE_MODE/);
});

test('${ENV} and ${ENV:-default} are interpolated in string values', async () => {
  const text = [
    'listen: ${HOST}:${PORT:-8088}',
    'master_key: "${MASTER}"',
    'billing:',
    '  source: ${SOURCE:-gateway}',
    '  fallback_subject_id: "$${literal}"',
    'limits:',
    '  max_retries: ${RETRIES}',
    'sidecar: { enabled: "${SIDECAR}" }',
  ].join('\n');
  const { config, diagnostics } = await loadText(text, {
    HOST: '10.0.0.1',
    MASTER: 'mk',
    RETRIES: '3',
    SIDECAR: 'false',
  });
  assert.deepEqual(messages(diagnostics), []);
  assert.ok(config);
  assert.deepEqual(config.listen, { host: '10.0.0.1', port: 8088 });
  assert.equal(config.masterKey, 'mk');
  assert.equal(config.billing.source, 'gateway');
  assert.equal(config.billing.fallbackSubjectId, '${literal}');
  assert.equal(config.limits.maxRetries, 3, 'an interpolated integer is coerced');
  assert.equal(config.sidecar.enabled, false, 'an interpolated boolean is coerced');
});

test('a missing variable without default is a diagnostic at the value', async () => {
  const { config, diagnostics } = await loadText(
    'log:\n  level: info\nbilling:\n  api_key: ${BILLING_KEY}\n',
  );
  assert.equal(config, undefined);
  const diagnostic = only(diagnostics);
  assert.equal(diagnostic.file, '/virtual/router.yaml');
  assert.deepEqual([diagnostic.line, diagnostic.col], [4, 12]);
  assert.match(diagnostic.message, /billing\.api_key: environment variable BILLING_KEY is not set/);
});

test('an interpolated value of the wrong kind is reported at its line', async () => {
  const { diagnostics } = await loadText('limits:\n  max_retries: ${RETRIES}\n', { RETRIES: 'many' });
  const diagnostic = only(diagnostics);
  assert.deepEqual([diagnostic.line, diagnostic.col], [2, 16]);
  assert.match(diagnostic.message, /limits\.max_retries must be integer/);
});

test('schema errors point at the offending key or value', async () => {
  const text = [
    'listen: localhost', // 1: bad format
    'billing:', // 2
    '  enabeld: true', // 3: typo
    '  balance_enforcement:', // 4
    '    failure_mode: maybe', // 5: enum
    'limits:', // 6
    '  max_body_bytes: -1', // 7: minimum
    '  upstream_body_timeout_ms: "300"', // 8: type
    'hooks:', // 9
    '  - options: {}', // 10: missing module
    'log: { level: loud }', // 11: enum in flow mapping
  ].join('\n');
  const { config, diagnostics } = await loadText(text);
  assert.equal(config, undefined);
  const found = diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`);
  assert.deepEqual(found, [
    '1:9 listen must be "host:port" (for example "127.0.0.1:8080" or "[::1]:8080")',
    '3:3 unknown key billing.enabeld (did you mean "enabled"?)',
    '5:19 billing.balance_enforcement.failure_mode must be one of: closed, open',
    '7:19 limits.max_body_bytes must be >= 1',
    '8:29 limits.upstream_body_timeout_ms must be integer',
    '10:5 hooks[0]: missing required key "module"',
    '11:15 log.level must be one of: trace, debug, info, warn, error, fatal, silent',
  ]);
});

test('an unknown top-level key is an error with a suggestion', async () => {
  const diagnostic = only((await loadText('listen: 127.0.0.1:1\nprovider_dir: ./p\n')).diagnostics);
  assert.deepEqual([diagnostic.line, diagnostic.col], [2, 1]);
  assert.equal(diagnostic.message, 'unknown key provider_dir (did you mean "providers_dir"?)');
});

test('YAML syntax errors and duplicate keys carry a position and no source snippet', async () => {
  const syntax = only((await loadText('master_key: supersecret-value\nlisten: [1, 2\n')).diagnostics);
  assert.match(syntax.message, /^YAML syntax error: /);
  assert.ok(syntax.line >= 2);
  assert.doesNotMatch(syntax.message, /supersecret/);
  const duplicate = only((await loadText('listen: 127.0.0.1:1\nlisten: 127.0.0.1:2\n')).diagnostics);
  assert.equal(duplicate.line, 2);
  assert.match(duplicate.message, /duplicated mapping key/);
});

test('a non-mapping document is refused', async () => {
  const diagnostic = only((await loadText('- listen\n')).diagnostics);
  assert.match(diagnostic.message, /must be a mapping/);
});

test('billing enabled in the file requires its four connection settings, reported at billing.enabled', async () => {
  const text = 'billing:\n  enabled: true\n  project_id: p\n  api_key: ""\n';
  const found = (await loadText(text)).diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`);
  assert.deepEqual(found, [
    '2:12 billing.base_url is empty (required when billing.enabled is true)',
    '4:12 billing.api_key is empty (required when billing.enabled is true)',
    '2:12 billing.extractor_rule_set_id is empty (required when billing.enabled is true)',
  ]);
});

test('billing.base_url must be http or https', async () => {
  const diagnostic = only(
    (await loadText('billing:\n  base_url: ftp://token-abc@billing.example\n')).diagnostics,
  );
  assert.deepEqual([diagnostic.line, diagnostic.col], [2, 13]);
  assert.equal(diagnostic.message, 'billing.base_url must be an http:// or https:// URL');
});

test('balance enforcement requires billing and a webhook secret', async () => {
  const text = 'billing:\n  balance_enforcement:\n    enabled: true\n';
  const found = (await loadText(text)).diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`);
  assert.deepEqual(found, [
    '3:14 billing.balance_enforcement.enabled requires billing.enabled to be true',
    '3:14 billing.balance_enforcement.webhook_secret is empty (required when balance enforcement is enabled)',
  ]);
});

test('the store requires an address and the access-key hash secret', async () => {
  const found = (await loadText('store:\n  enabled: true\n')).diagnostics.map(
    (d) => `${d.line}:${d.col} ${d.message}`,
  );
  assert.deepEqual(found, [
    '2:12 store.addr is empty (required when store.enabled is true, unless store.sentinels are given)',
    '2:12 store.access_key_hash_secret is empty (required when store.enabled is true)',
  ]);
  const bad = only((await loadText('store:\n  addr: http://cache:6379\n')).diagnostics);
  assert.equal(
    bad.message,
    'store.addr must be a redis:// or rediss:// URL (several, comma-separated, for the seed nodes of a cluster)',
  );
  const seeds = 'redis://a:6379,redis://b:6379';
  const single = only(
    (await loadText(`store:\n  enabled: true\n  addr: ${seeds}\n  access_key_hash_secret: s\n`)).diagnostics,
  );
  assert.match(single.message, /set store\.cluster: true for the seed nodes/);
  const { config, diagnostics } = await loadText(
    `store:\n  enabled: true\n  cluster: true\n  addr: ${seeds}\n  access_key_hash_secret: s\n`,
  );
  assert.deepEqual(messages(diagnostics), []);
  assert.equal(config?.store.cluster, true);
});

test('listen ports above 65535 and a sidecar sharing the gateway address are refused', async () => {
  assert.match(only((await loadText('listen: 127.0.0.1:70000\n')).diagnostics).message, /port above 65535/);
  const clash = only(
    (await loadText('listen: 127.0.0.1:9000\nbilling: { listen: "127.0.0.1:9000" }\n')).diagnostics,
  );
  assert.match(clash.message, /billing\.listen must differ from listen/);
  const { config } = await loadText(
    'listen: 127.0.0.1:9000\nsidecar: { enabled: false }\nbilling: { listen: "127.0.0.1:9000" }\n',
  );
  assert.ok(config, 'no clash when the sidecar is off');
});

test('caller overrides win over the environment and the file', async () => {
  const { config } = await loadConfigFromString('sidecar: { enabled: true }\n', '/virtual/router.yaml', {
    env: { ROUTER_LISTEN: '127.0.0.1:1' },
    overrides: { sidecar: { enabled: false }, listen: '127.0.0.1:2' },
  });
  assert.equal(config?.sidecar.enabled, false);
  assert.deepEqual(config?.listen, { host: '127.0.0.1', port: 2 });
  const { diagnostics } = await loadConfigFromString('', '/virtual/router.yaml', {
    env: {},
    overrides: { limits: { max_retries: 'x' } },
  });
  assert.match(
    only(diagnostics).message,
    /limits\.max_retries must be integer \(set by override limits\.max_retries\)/,
  );
});

test('relative paths resolve against the main file folder; hook packages stay bare', async () => {
  const text = [
    'providers_dir: ../providers',
    'pricing: [./pricing.yaml, /etc/router/extra-pricing.yaml]',
    'hooks:',
    '  - module: ./hooks/tag.ts',
    '    options: { header: x-team, limit: 3 }',
    '  - module: router-hook-audit',
  ].join('\n');
  const { config } = await loadConfigFromString(text, '/srv/router/conf/router.yaml', { env: {} });
  assert.ok(config);
  assert.equal(config.providersDir, '/srv/router/providers');
  assert.deepEqual(config.pricing.files, ['/srv/router/conf/pricing.yaml', '/etc/router/extra-pricing.yaml']);
  assert.deepEqual(config.hooks, [
    { module: '/srv/router/conf/hooks/tag.ts', options: { header: 'x-team', limit: 3 } },
    { module: 'router-hook-audit', options: {} },
  ]);
  const single = await loadConfigFromString('pricing: prices.yaml\n', '/srv/router.yaml', { env: {} });
  assert.deepEqual(single.config?.pricing.files, ['/srv/prices.yaml']);
});

test('models and keys files are loaded, and their diagnostics carry their own file', async () => {
  const tmp = await tempDir();
  try {
    await tmp.write('models.yaml', 'models:\n  m1: { providers: [openai] }\n  m2: { providers: [] }\n');
    await tmp.write('keys.yaml', 'access_keys:\n  - name: a\n    value: secret-a\n');
    const main = await tmp.write('router.yaml', 'models: models.yaml\nkeys: keys.yaml\n');
    const { config, diagnostics } = await loadConfig(main, { env: {} });
    assert.equal(config, undefined);
    const diagnostic = only(diagnostics);
    assert.equal(diagnostic.file, join(tmp.dir, 'models.yaml'));
    assert.deepEqual([diagnostic.line, diagnostic.col], [3, 20]);

    await tmp.write('models.yaml', 'models:\n  m1: { providers: [openai] }\n');
    const ok = await loadConfig(main, { env: { ROUTER_PROVIDER_OPENAI_API_KEY: 'sk-1' } });
    assert.deepEqual(messages(ok.diagnostics), []);
    assert.equal(ok.config?.models.entries[0]?.id, 'm1');
    assert.equal(ok.config?.keys.file, join(tmp.dir, 'keys.yaml'));
    assert.equal(ok.config?.keys.accessKeys[0]?.value, 'secret-a');
    assert.deepEqual(ok.config?.keys.providerKeys.get('openai'), [{ name: 'env', value: 'sk-1' }]);
  } finally {
    await tmp.remove();
  }
});

test('a missing main, models or keys file is a diagnostic', async () => {
  const tmp = await tempDir();
  try {
    const missingMain = only((await loadConfig(join(tmp.dir, 'nope.yaml'), { env: {} })).diagnostics);
    assert.equal(missingMain.message, 'cannot read configuration: file not found');
    const main = await tmp.write('router.yaml', 'models: ./models.yaml\nkeys: ./keys.yaml\n');
    const found = messages((await loadConfig(main, { env: {} })).diagnostics);
    assert.deepEqual(found, [
      `${join(tmp.dir, 'models.yaml')}:0:0: cannot read models file: file not found`,
      `${join(tmp.dir, 'keys.yaml')}:0:0: cannot read keys file: file not found`,
    ]);
  } finally {
    await tmp.remove();
  }
});

test('hashed access keys need the hash secret; the master key must not double as an access key', async () => {
  const tmp = await tempDir();
  try {
    await tmp.write('keys.yaml', `access_keys:\n  - name: hashed\n    hash: ${'A'.repeat(43)}\n`);
    const main = await tmp.write('router.yaml', 'keys: keys.yaml\n');
    const hashed = only((await loadConfig(main, { env: {} })).diagnostics);
    assert.match(
      hashed.message,
      /access key "hashed" is given as a hash, which needs store.access_key_hash_secret/,
    );
    assert.equal(hashed.line, 1, 'reported at the keys entry of the main file');
    const withSecret = await loadConfig(main, { env: { ROUTER_ACCESS_KEY_HASH_SECRET: 'h' } });
    assert.deepEqual(messages(withSecret.diagnostics), []);

    const clash = await loadConfigFromString('master_key: shared-secret-1\n', join(tmp.dir, 'x.yaml'), {
      env: { ROUTER_ACCESS_KEY_BOB: 'shared-secret-1' },
    });
    assert.equal(only(clash.diagnostics).message, 'master_key is also the secret of access key "bob"');
  } finally {
    await tmp.remove();
  }
});

test('no diagnostic ever contains a secret value', async () => {
  const secrets = [
    'S3CR3T-billing',
    'S3CR3T-webhook',
    'S3CR3T-master',
    'S3CR3T-store',
    'S3CR3T-hash',
    'S3CR3T-key',
  ];
  const text = [
    'master_key: S3CR3T-master',
    'billing:',
    '  enabled: true',
    '  base_url: "S3CR3T-billing"', // not a URL
    '  api_key: [S3CR3T-billing]', // wrong type
    '  balance_enforcement: { enabled: true, webhook_secret: 7, failure_mode: S3CR3T-webhook }',
    'store: { enabled: true, password: { x: S3CR3T-store }, addr: "S3CR3T-store" }',
    'limits: { max_retries: S3CR3T-key }',
  ].join('\n');
  const env = {
    ROUTER_STORE_ENABLED: 'S3CR3T-store',
    ROUTER_ACCESS_KEY_ALICE: 'S3CR3T-master',
    ROUTER_ACCESS_KEY_BOB: 'S3CR3T-master',
    ROUTER_BILLING_BALANCE_REQUEST_TIMEOUT_MS: 'S3CR3T-hash',
  };
  const { diagnostics } = await loadText(text, env);
  assert.ok(diagnostics.length >= 6, messages(diagnostics).join('\n'));
  for (const line of messages(diagnostics)) {
    for (const secret of secrets) assert.ok(!line.includes(secret), `leaked ${secret} in: ${line}`);
  }
});

test('schema.json documents every property and forbids unknown keys everywhere', async () => {
  const { default: schema } = await import('../../config/schema.json', { with: { type: 'json' } });
  const problems: string[] = [];
  function walk(node: Record<string, unknown>, path: string): void {
    if (typeof node.description !== 'string' || node.description === '')
      problems.push(`${path}: no description`);
    const properties = node.properties as Record<string, Record<string, unknown>> | undefined;
    if (properties !== undefined && path !== '/hooks/items/options') {
      if (node.additionalProperties !== false) problems.push(`${path}: additionalProperties is not false`);
      for (const [key, child] of Object.entries(properties)) walk(child, `${path}/${key}`);
    }
    if (typeof node.items === 'object' && node.items !== null)
      walk(node.items as Record<string, unknown>, `${path}/items`);
  }
  walk(schema as Record<string, unknown>, '');
  assert.deepEqual(problems, []);
  assert.equal(typeof (schema as { $id?: unknown }).$id, 'string');
});

test('request_id.trusted_sources takes addresses and CIDR ranges; anything else is a diagnostic', async () => {
  const ok = await loadText(
    'request_id: { trusted_sources: ["127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"] }',
  );
  assert.deepEqual(messages(ok.diagnostics), []);
  assert.deepEqual(ok.config?.requestId.trustedSources, ['127.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8']);
  const bad = await loadText(
    'request_id:\n  trusted_sources: ["10.0.0.0/33", "ingress.local", "1.2.3.4/x"]\n',
  );
  assert.equal(bad.config, undefined);
  assert.equal(bad.diagnostics.length, 3);
  assert.match(
    messages(bad.diagnostics)[0] ?? '',
    /:2:\d+: request_id\.trusted_sources\[0\] must be an IP address or CIDR range/,
  );
});

test('workers: a number of processes or "auto" (one per core); anything else is refused', async () => {
  assert.equal((await loadText('workers: 4\n')).config?.workers, 4);
  assert.equal((await loadText('workers: auto\n')).config?.workers, availableParallelism());
  assert.equal((await loadText('{}\n', { ROUTER_WORKERS: '2' })).config?.workers, 2);
  for (const bad of ['workers: 0', 'workers: many', 'workers: 1000']) {
    const d = (await loadText(`${bad}\n`)).diagnostics;
    assert.equal(d.length, 1, bad);
    assert.match(d[0]!.message, /workers/, bad);
  }
});

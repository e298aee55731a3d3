// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${ENV}` in plain strings is the configuration syntax under test.
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { test } from 'node:test';
import { formatDiagnostic } from '../../common/config-diagnostics.ts';
import type { ConfigDiagnostic } from '../../common/config-types.ts';
import { providerKeyEnvName } from '../../common/provider-key-env.ts';
import { accessKeyEnvName, loadKeysFile, parseIsoInstant, parseKeysSource } from '../../config/keys.ts';
import { tempDir } from './temp-dir.ts';

function found(diagnostics: readonly ConfigDiagnostic[]): string[] {
  return diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`);
}

const HASH = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123_-x';

test('access keys: value or hash, defaults, subject and dates', () => {
  const text = [
    'access_keys:',
    '  - name: client-a',
    '    value: ak_secret_a',
    '    subject_type: team',
    '    subject_id: team-a',
    '    expires_at: 2027-01-01',
    '    created_at: 2026-01-15T08:30:00Z',
    '  - name: client-b',
    `    hash: ${HASH}`,
    '    status: revoked',
  ].join('\n');
  const { keys, diagnostics } = parseKeysSource(text, '/k/keys.yaml');
  assert.deepEqual(diagnostics, []);
  assert.equal(keys.file, '/k/keys.yaml');
  assert.deepEqual(keys.accessKeys, [
    {
      name: 'client-a',
      value: 'ak_secret_a',
      hash: undefined,
      subjectType: 'team',
      subjectId: 'team-a',
      status: 'active',
      expiresAt: Date.UTC(2027, 0, 1),
      createdAt: Date.UTC(2026, 0, 15, 8, 30),
    },
    {
      name: 'client-b',
      value: undefined,
      hash: HASH,
      subjectType: undefined,
      subjectId: undefined,
      status: 'revoked',
      expiresAt: undefined,
      createdAt: undefined,
    },
  ]);
});

test('parseIsoInstant accepts dates and zoned date-times only', () => {
  assert.equal(parseIsoInstant('2027-01-01'), Date.UTC(2027, 0, 1));
  assert.equal(parseIsoInstant('2027-01-01T10:00:00Z'), Date.UTC(2027, 0, 1, 10));
  assert.equal(parseIsoInstant('2027-01-01T10:00:00.250Z'), Date.UTC(2027, 0, 1, 10, 0, 0, 250));
  assert.equal(parseIsoInstant('2027-01-01T10:00+02:00'), Date.UTC(2027, 0, 1, 8));
  assert.equal(parseIsoInstant('2027-01-01 10:00:00-0130'), Date.UTC(2027, 0, 1, 11, 30));
  assert.equal(parseIsoInstant('2027-01-01T10:00:00'), undefined, 'no zone: refused');
  assert.equal(parseIsoInstant('2027-02-30'), undefined);
  assert.equal(parseIsoInstant('2027-01-01T24:00:00Z'), undefined);
  assert.equal(parseIsoInstant('next tuesday'), undefined);
  assert.equal(parseIsoInstant('1767225600'), undefined);
});

test('a bad expiry is reported at its value', () => {
  const text = 'access_keys:\n  - name: a\n    value: s\n    expires_at: 2027-01-01T00:00:00\n';
  assert.deepEqual(found(parseKeysSource(text, 'keys.yaml').diagnostics), [
    '4:17 access_keys[0] (a): expires_at must be an ISO 8601 date (2027-01-01) or date-time with zone (2027-01-01T00:00:00Z)',
  ]);
});

test('provider keys: api_key short form and named keys', () => {
  const text = [
    'providers:',
    '  openai:',
    '    api_key: sk-openai',
    '  anthropic:',
    '    keys:',
    '      - { name: primary, value: sk-ant-1 }',
    '      - { name: secondary, value: sk-ant-2 }',
  ].join('\n');
  const { keys, diagnostics } = parseKeysSource(text, 'keys.yaml');
  assert.deepEqual(diagnostics, []);
  assert.deepEqual(
    [...keys.providerKeys],
    [
      ['openai', [{ name: 'default', value: 'sk-openai' }]],
      [
        'anthropic',
        [
          { name: 'primary', value: 'sk-ant-1' },
          { name: 'secondary', value: 'sk-ant-2' },
        ],
      ],
    ],
  );
});

test('environment keys add access keys and replace provider keys', () => {
  const text = [
    'access_keys:',
    '  - { name: client_a, value: from-file, subject_id: acme, status: disabled }',
    'providers:',
    '  azure-openai: { api_key: file-azure }',
    '  openai: { keys: [{ name: k1, value: file-1 }, { name: k2, value: file-2 }] }',
  ].join('\n');
  const env = {
    ROUTER_ACCESS_KEY_CLIENT_A: 'from-env',
    ROUTER_ACCESS_KEY_NEW_CLIENT: 'new-secret',
    ROUTER_ACCESS_KEY_HASH_SECRET: 'not-an-access-key',
    ROUTER_ACCESS_KEY_EMPTY: '',
    ROUTER_PROVIDER_AZURE_OPENAI_API_KEY: 'env-azure',
    ROUTER_PROVIDER_MY_LLM_API_KEY: 'env-my-llm',
    UNRELATED: 'x',
  };
  const { keys, diagnostics } = parseKeysSource(text, 'keys.yaml', env);
  assert.deepEqual(diagnostics, []);
  assert.deepEqual(
    keys.accessKeys.map((k) => [k.name, k.value, k.subjectId, k.status]),
    [
      ['client_a', 'from-env', 'acme', 'disabled'],
      ['new_client', 'new-secret', undefined, 'active'],
    ],
  );
  assert.deepEqual(keys.providerKeys.get('azure-openai'), [{ name: 'env', value: 'env-azure' }]);
  assert.deepEqual(keys.providerKeys.get('my-llm'), [{ name: 'env', value: 'env-my-llm' }]);
  assert.equal(keys.providerKeys.get('openai')?.length, 2, 'untouched without its variable');
});

test('environment names are derived as documented', () => {
  assert.equal(accessKeyEnvName('client_a'), 'ROUTER_ACCESS_KEY_CLIENT_A');
  assert.equal(providerKeyEnvName('azure-openai'), 'ROUTER_PROVIDER_AZURE_OPENAI_API_KEY');
});

test('without a file the environment alone defines keys', async () => {
  const { keys, diagnostics } = await loadKeysFile(undefined, {
    ROUTER_ACCESS_KEY_CI: 'ci-secret',
    ROUTER_PROVIDER_OPENAI_API_KEY: 'sk',
  });
  assert.deepEqual(diagnostics, []);
  assert.equal(keys.file, undefined);
  assert.deepEqual(
    keys.accessKeys.map((k) => k.name),
    ['ci'],
  );
  assert.deepEqual([...keys.providerKeys.keys()], ['openai']);
});

test('keys files interpolate ${ENV}, and a missing variable is a positioned diagnostic', async () => {
  const tmp = await tempDir();
  try {
    const file = await tmp.write('keys.yaml', 'providers:\n  openai:\n    api_key: ${OPENAI_KEY}\n');
    const ok = await loadKeysFile(file, { OPENAI_KEY: 'sk-live' });
    assert.deepEqual(ok.keys.providerKeys.get('openai'), [{ name: 'default', value: 'sk-live' }]);
    const missing = await loadKeysFile(file, {});
    assert.deepEqual(missing.diagnostics.map(formatDiagnostic), [
      `${file}:3:14: providers.openai.api_key: environment variable OPENAI_KEY is not set (write \${OPENAI_KEY:-default} to allow that)`,
    ]);
  } finally {
    await tmp.remove();
  }
});

test('structural errors: value and hash, api_key and keys, duplicates, bad hash', () => {
  const text = [
    'access_keys:', // 1
    `  - { name: a, value: s1, hash: ${HASH} }`, // 2
    '  - { name: b }', // 3
    '  - { name: c, value: s2 }', // 4
    '  - { name: c, value: s3 }', // 5
    '  - { name: d, value: s2 }', // 6
    'providers:', // 7
    '  p1: { api_key: k, keys: [{ name: x, value: v }] }', // 8
    '  p2: { keys: [{ name: x, value: v1 }, { name: x, value: v2 }, { name: y, value: v1 }] }', // 9
  ].join('\n');
  assert.deepEqual(found(parseKeysSource(text, 'keys.yaml').diagnostics), [
    '2:5 access_keys[0] (a) needs exactly one of "value" or "hash"',
    '3:5 access_keys[1] (b) needs exactly one of "value" or "hash"',
    '5:7 access_keys[3] (c): access key name "c" is already used by access_keys[2] (c)',
    '6:16 access_keys[4] (d): same secret as access_keys[2] (c); every access key needs its own secret',
    '8:3 providers.p1 needs exactly one of "api_key" or "keys"',
    '9:48 providers.p2.keys[1]: key name "x" is used twice',
    '9:75 providers.p2.keys[2] (y): same secret as an earlier key',
  ]);
  const schema = found(
    parseKeysSource('access_keys:\n  - { name: "-bad", hash: short, status: gone }\nextra: 1\n', 'keys.yaml')
      .diagnostics,
  );
  assert.deepEqual(schema, [
    "2:13 access_keys[0].name must be 1-128 characters: letters, digits, '.', '_', ':', '@', '-' (not starting with a symbol)",
    '2:27 access_keys[0].hash must be 43 base64url characters (an HMAC-SHA256 digest)',
    '2:42 access_keys[0].status must be one of: active, revoked, disabled',
    '3:1 unknown key in (top level)',
  ]);
});

test('a duplicate secret between the file and the environment names the variable, not the secret', () => {
  const { diagnostics } = parseKeysSource(
    'access_keys:\n  - { name: a, value: dup-SECRET-1 }\n',
    'keys.yaml',
    {
      ROUTER_ACCESS_KEY_B: 'dup-SECRET-1',
    },
  );
  assert.deepEqual(diagnostics.map(formatDiagnostic), [
    'keys.yaml:0:0: ROUTER_ACCESS_KEY_B: same secret as access_keys[0] (a); every access key needs its own secret',
  ]);
});

test('no keys diagnostic contains a secret', () => {
  const text = [
    'access_keys:',
    '  - { name: a, value: SECRET-one, expires_at: SECRET-two }',
    '  - { name: b, value: SECRET-one }',
    '  - { name: c, value: [SECRET-three] }',
    'providers:',
    '  p: { keys: [{ name: k, value: SECRET-four }, { name: j, value: SECRET-four }] }',
    '  q: { api_key: 5, keys: [] }',
    '  r: { SECRET-pasted-here: 1 }',
  ].join('\n');
  const { diagnostics } = parseKeysSource(text, 'keys.yaml', { ROUTER_ACCESS_KEY_Z: 'SECRET-one' });
  assert.ok(diagnostics.length >= 3);
  for (const line of diagnostics.map(formatDiagnostic)) assert.doesNotMatch(line, /SECRET-/);
});

test('the example keys file is valid once its variables are set', async () => {
  const file = resolve(import.meta.dirname, '../../deploy/config/keys.example.yaml');
  const env = {
    CLIENT_A_KEY: 'ak_a',
    OPENAI_API_KEY: 'sk-o',
    ANTHROPIC_API_KEY: 'sk-a1',
    ANTHROPIC_API_KEY_2: 'sk-a2',
    GEMINI_API_KEY: 'g',
  };
  const { keys, diagnostics } = await loadKeysFile(file, env);
  assert.deepEqual(diagnostics.map(formatDiagnostic), []);
  assert.deepEqual(
    keys.accessKeys.map((k) => [k.name, k.status]),
    [
      ['client-a', 'active'],
      ['old-client', 'revoked'],
    ],
  );
  assert.equal(keys.accessKeys[0]!.expiresAt, Date.UTC(2027, 0, 1));
  assert.deepEqual(keys.accessKeys[0]!.limits, {
    requestsPerMinute: 600,
    tokensPerMinute: 200000,
    maxConcurrent: 8,
  });
  assert.deepEqual(keys.accessKeys[0]!.models, ['gpt-*', 'claude-*', 'gemini-*']);
  assert.deepEqual([...keys.providerKeys.keys()], ['openai', 'anthropic', 'gemini']);
});

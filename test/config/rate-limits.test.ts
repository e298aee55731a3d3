import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { formatDiagnostic } from '../../common/config-diagnostics.ts';
import type { ConfigDiagnostic } from '../../common/config-types.ts';
import { parseKeysSource } from '../../config/keys.ts';
import { loadConfig, loadConfigFromString } from '../../config/load.ts';
import { tempDir } from './temp-dir.ts';

function found(diagnostics: readonly ConfigDiagnostic[]): string[] {
  return diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`);
}

async function loadText(text: string, env: Record<string, string> = {}) {
  return loadConfigFromString(text, '/virtual/router.yaml', { env });
}

test('rate_limits: a missing block limits nothing, fails open and leases slots for 30 s', async () => {
  const { config, diagnostics } = await loadText('');
  assert.deepEqual(diagnostics, []);
  assert.deepEqual(config?.rateLimits, {
    perKey: {},
    perSubject: {},
    failureMode: 'open',
    leaseMs: 30_000,
    subjects: new Map(),
  });
  assert.equal(config?.rateLimits.perKey.models, undefined);
});

test('rate_limits: every key parses to its camelCase field', async () => {
  const text = [
    'rate_limits:',
    '  per_key:',
    '    requests_per_minute: 600',
    '    tokens_per_minute: 200000',
    '    max_concurrent: 8',
    '    models: ["gpt-*", "claude-?-sonnet", "gemini-3.8-flash"]',
    '  per_subject: { requests_per_minute: 1200, max_concurrent: 16 }',
    '  failure_mode: closed',
    '  lease_s: 4.5',
    '  subjects:',
    '    "api_key:team-a": { tokens_per_minute: 50000 }',
    '    "api_key:ns:with:colons": { max_concurrent: 1 }',
    '    "api_key:defaults-only": {}',
  ].join('\n');
  const { config, diagnostics } = await loadText(text);
  assert.deepEqual(found(diagnostics), []);
  assert.deepEqual(config?.rateLimits, {
    perKey: {
      requestsPerMinute: 600,
      tokensPerMinute: 200000,
      maxConcurrent: 8,
      models: ['gpt-*', 'claude-?-sonnet', 'gemini-3.8-flash'],
    },
    perSubject: { requestsPerMinute: 1200, maxConcurrent: 16 },
    failureMode: 'closed',
    leaseMs: 4500,
    subjects: new Map([
      ['api_key:team-a', { tokensPerMinute: 50000 }],
      ['api_key:ns:with:colons', { maxConcurrent: 1 }],
      ['api_key:defaults-only', {}],
    ]),
  });
});

test('rate_limits: wrong values are reported where they are written, naming the fix', async () => {
  const text = [
    'rate_limits:', // 1
    '  per_key:', // 2
    '    requests_per_minute: 0', // 3
    '    tokens_per_minute: 1.5', // 4
    '    max_concurent: 2', // 5
    '    models: ["gpt-[45]", "", "a b"]', // 6
    '  per_subject: { max_concurrent: -1 }', // 7
    '  failure_mode: maybe', // 8
    '  lease_s: 2', // 9
    '  subjects:', // 10
    '    team-a: { requests_per_minute: 10 }', // 11
    '    "api_key:b": { models: ["x"] }', // 12
  ].join('\n');
  const { config, diagnostics } = await loadText(text);
  assert.equal(config, undefined);
  assert.deepEqual(found(diagnostics), [
    '3:26 rate_limits.per_key.requests_per_minute must be >= 1',
    '4:24 rate_limits.per_key.tokens_per_minute must be integer',
    '5:5 unknown key rate_limits.per_key.max_concurent (did you mean "max_concurrent"?)',
    '6:14 rate_limits.per_key.models[0] must be a model id or a pattern using only * and ? (no spaces, commas, !, \\, [ ], { })',
    '6:26 rate_limits.per_key.models[1] must NOT have fewer than 1 characters',
    '6:30 rate_limits.per_key.models[2] must be a model id or a pattern using only * and ? (no spaces, commas, !, \\, [ ], { })',
    '7:34 rate_limits.per_subject.max_concurrent must be >= 1',
    '8:17 rate_limits.failure_mode must be one of: open, closed',
    '9:12 rate_limits.lease_s must be >= 3',
    '11:5 rate_limits.subjects: key "team-a" must be "<subject type>:<subject id>" (for example "api_key:team-a")',
    '12:20 unknown key rate_limits.subjects["api_key:b"].models',
  ]);
});

test('rate_limits: an empty model list is refused, pointing at "leave models out"', async () => {
  const { diagnostics } = await loadText('rate_limits:\n  per_key:\n    models: []\n');
  assert.deepEqual(found(diagnostics), [
    '3:13 rate_limits.per_key.models is an empty list, which would allow no model: leave models out to allow every model, or list ids or patterns such as "gpt-*"',
  ]);
});

test('rate_limits.subjects: in file mode, a subject type no key has is a typo', async () => {
  const tmp = await tempDir();
  try {
    await tmp.write(
      'keys.yaml',
      'access_keys:\n  - { name: a, value: secret-a, subject_type: team, subject_id: t1 }\n',
    );
    const main = await tmp.write(
      'router.yaml',
      [
        'keys: keys.yaml',
        'rate_limits:',
        '  subjects:',
        '    "team:t1": { requests_per_minute: 10 }',
        '    "api_key:b": { requests_per_minute: 10 }',
        '    "api-key:c": { requests_per_minute: 10 }',
      ].join('\n'),
    );
    const { diagnostics } = await loadConfig(main, { env: {} });
    assert.deepEqual(diagnostics.map(formatDiagnostic), [
      `${join(tmp.dir, 'router.yaml')}:6:5: rate_limits.subjects: no access key has subject type "api-key" (key "api-key:c"); the types in use are "api_key", "team" (billing.subject_type, or subject_type on a key)`,
    ]);
    // With the store, keys (and their subject types) live there: nothing to check against.
    const stored = await loadConfig(main, {
      env: {
        ROUTER_STORE_ENABLED: 'true',
        ROUTER_STORE_ADDR: 'redis://127.0.0.1:6379',
        ROUTER_ACCESS_KEY_HASH_SECRET: 'h',
      },
    });
    assert.deepEqual(stored.diagnostics.map(formatDiagnostic), []);
    assert.deepEqual(stored.config?.rateLimits.subjects.get('api-key:c'), { requestsPerMinute: 10 });
  } finally {
    await tmp.remove();
  }
});

test('keys file: limits and models on an entry; absent when not written', () => {
  const text = [
    'access_keys:',
    '  - name: limited',
    '    value: ak_limited',
    '    limits: { requests_per_minute: 600, tokens_per_minute: 200000, max_concurrent: 8 }',
    '    models: ["gpt-*", "claude-*"]',
    '  - name: models-only',
    '    value: ak_models_only',
    '    models: ["gemini-?.?-flash"]',
    '  - name: empty-limits',
    '    value: ak_empty_limits',
    '    limits: {}',
    '  - name: plain',
    '    value: ak_plain',
  ].join('\n');
  const { keys, diagnostics } = parseKeysSource(text, 'keys.yaml');
  assert.deepEqual(found(diagnostics), []);
  const [limited, modelsOnly, emptyLimits, plain] = keys.accessKeys;
  assert.deepEqual(limited?.limits, { requestsPerMinute: 600, tokensPerMinute: 200000, maxConcurrent: 8 });
  assert.deepEqual(limited?.models, ['gpt-*', 'claude-*']);
  assert.deepEqual(modelsOnly?.models, ['gemini-?.?-flash']);
  assert.equal('limits' in modelsOnly!, false);
  // `limits: {}` sets nothing of its own: the per_key defaults apply, as without it.
  assert.equal('limits' in emptyLimits!, false);
  assert.equal('limits' in plain!, false);
  assert.equal('models' in plain!, false);
});

test('keys file: limits and models mistakes are positioned and name the fix', () => {
  const text = [
    'access_keys:', // 1
    '  - name: a', // 2
    '    value: ak_a', // 3
    '    limits: { requests_per_minute: 0, per_minute: 5 }', // 4
    '    models: []', // 5
    '  - name: b', // 6
    '    value: ak_b', // 7
    '    models: ["gpt-{4,5}", 7]', // 8
  ].join('\n');
  assert.deepEqual(found(parseKeysSource(text, 'keys.yaml').diagnostics), [
    '4:36 access_keys[0].limits.requests_per_minute must be >= 1',
    '4:39 unknown key in access_keys[0].limits',
    '8:14 access_keys[1].models[0] must be a model id or a pattern using only * and ? (no spaces, commas, !, \\, [ ], { })',
    '8:27 access_keys[1].models[1] must be string',
  ]);
  // The empty list is reported once the schema passes.
  const empty = parseKeysSource('access_keys:\n  - name: a\n    value: ak_a\n    models: []\n', 'keys.yaml');
  assert.deepEqual(found(empty.diagnostics), [
    '4:13 access_keys[0] (a): models is an empty list, which would allow no model: leave models out to allow every model, or list ids or patterns such as "gpt-*"',
  ]);
});

test('keys file: ROUTER_ACCESS_KEY_<NAME> keys get no limits; replacing a secret keeps the entry’s', () => {
  const text = [
    'access_keys:',
    '  - name: a',
    '    value: ak_file_a',
    '    limits: { max_concurrent: 2 }',
    '    models: ["gpt-*"]',
  ].join('\n');
  const { keys, diagnostics } = parseKeysSource(text, 'keys.yaml', {
    ROUTER_ACCESS_KEY_A: 'ak_env_a',
    ROUTER_ACCESS_KEY_B: 'ak_env_b',
  });
  assert.deepEqual(found(diagnostics), []);
  const a = keys.accessKeys.find((k) => k.name === 'a');
  const b = keys.accessKeys.find((k) => k.name === 'b');
  assert.equal(a?.value, 'ak_env_a');
  assert.deepEqual([a?.limits, a?.models], [{ maxConcurrent: 2 }, ['gpt-*']]);
  assert.ok(b !== undefined && !('limits' in b) && !('models' in b));
});

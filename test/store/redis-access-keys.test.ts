// The access-key record's hash fields (store/redis-access-keys.ts) without a server: limits and models
// written as JSON fields and read back, and a malformed field read as unset rather than failing a request.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { accessKeyFields, encodeLimits, limitsFrom, parseAccessKey } from '../../store/redis-access-keys.ts';
import { parseSubjectLimits } from '../../store/redis-store.ts';
import { testKeyRecord } from '../support/redis.ts';

function withField(name: string, value: string): string[] {
  const fields = accessKeyFields(testKeyRecord('k', 'ak_k'));
  return [...fields, name, value];
}

test('limits and models are written as snake_case JSON fields and read back', () => {
  const key = testKeyRecord('k', 'ak_k', {
    limits: { requestsPerMinute: 600, maxConcurrent: 8 },
    models: ['gpt-*', 'claude-*'],
  });
  const fields = accessKeyFields(key);
  const byName = new Map<string, string>();
  for (let i = 0; i < fields.length; i += 2) byName.set(fields[i]!, fields[i + 1]!);
  assert.equal(byName.get('limits'), '{"requests_per_minute":600,"max_concurrent":8}');
  assert.equal(byName.get('models'), '["gpt-*","claude-*"]');
  assert.deepEqual(parseAccessKey(fields), key);
});

test('a record without limits or models has no such fields and parses without them', () => {
  const fields = accessKeyFields(testKeyRecord('k', 'ak_k', { limits: {} }));
  assert.equal(fields.includes('limits'), false);
  assert.equal(fields.includes('models'), false);
  const parsed = parseAccessKey(fields);
  assert.equal(parsed !== undefined && 'limits' in parsed, false);
  assert.equal(parsed !== undefined && 'models' in parsed, false);
  assert.equal(encodeLimits(undefined), '');
});

test('a malformed limits or models field counts as unset; the rest of the record stands', () => {
  const malformedLimits = [
    'not json',
    '[600]',
    'null',
    '600',
    '{"requests_per_minute":0}',
    '{"requests_per_minute":-5}',
    '{"requests_per_minute":1.5}',
    '{"requests_per_minute":"600"}',
    '{"tokens_per_minute":1e300}',
    '{}',
  ];
  for (const value of malformedLimits) {
    const parsed = parseAccessKey(withField('limits', value));
    assert.equal(parsed?.name, 'k', value);
    assert.equal(parsed?.status, 'active', value);
    assert.equal(parsed?.limits, undefined, value);
  }
  for (const value of ['gpt-*', '{"a":1}', '[1,2]', '["gpt-*",null]', '[""]', '']) {
    const parsed = parseAccessKey(withField('models', value));
    assert.equal(parsed?.name, 'k', value);
    assert.equal(parsed?.models, undefined, value);
  }
  // An unknown property is left alone (a later version may add one).
  assert.deepEqual(limitsFrom({ requests_per_minute: 5, burst: 9 }), { requestsPerMinute: 5 });
  assert.deepEqual(parseAccessKey(withField('models', '[]'))?.models, []);
});

test("a subject's :limits hash: positive integers are read, anything else is unset", () => {
  assert.deepEqual(
    parseSubjectLimits({ requests_per_minute: '60', tokens_per_minute: '1000', max_concurrent: '2' }),
    { requestsPerMinute: 60, tokensPerMinute: 1000, maxConcurrent: 2 },
  );
  assert.deepEqual(
    parseSubjectLimits({ requests_per_minute: '0', tokens_per_minute: 'x', max_concurrent: '3' }),
    {
      maxConcurrent: 3,
    },
  );
  assert.equal(parseSubjectLimits({}), undefined);
  assert.equal(parseSubjectLimits({ max_concurrent: '-1' }), undefined);
});

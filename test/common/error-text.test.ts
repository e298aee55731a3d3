// errorText, the one error-to-text helper: what it keeps (message, code) and what it never lets through
// to a log line or a CLI message (later lines, JSON input, credentials, unbounded length).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorText } from '../../common/errors.ts';

test('the message of an Error, its code when the message lacks it, String() of anything else', () => {
  assert.equal(errorText(new Error('disk full')), 'disk full');
  assert.equal(
    errorText(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' })),
    'other side closed (UND_ERR_SOCKET)',
  );
  assert.equal(
    errorText(Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT' })),
    'ENOENT: no such file',
  );
  assert.equal(errorText('plain'), 'plain');
  assert.equal(errorText(42), '42');
  assert.equal(errorText(undefined), 'undefined');
  const refused = Object.assign(new AggregateError([new Error('connect ECONNREFUSED 127.0.0.1:1')], ''), {
    code: 'ECONNREFUSED',
  });
  assert.equal(errorText(refused), 'connect ECONNREFUSED 127.0.0.1:1');
});

test('only the first line: no stack, code frame or require stack', () => {
  assert.equal(
    errorText(new Error("Cannot find module 'x'\nRequire stack:\n- /srv/a.ts")),
    "Cannot find module 'x'",
  );
  assert.equal(
    errorText(new Error('bad indentation (3:5)\n\n 3 |   api_key: sk-live')),
    'bad indentation (3:5)',
  );
});

test('the input a JSON parser quotes is dropped', () => {
  let parseError: unknown;
  try {
    JSON.parse('tell me my secret plan');
  } catch (err) {
    parseError = err;
  }
  const text = errorText(parseError);
  assert.doesNotMatch(text, /secret|tell me/);
  assert.match(text, /is not valid JSON/);
});

test('credentials are masked', () => {
  const cases = [
    'upstream said: Authorization: Bearer sk-abcdefghijklmnop1234',
    'GET https://example.test/v1beta/models?alt=sse&key=AIzaSyA1234567890abcdefghijklmno failed',
    'connect to redis://default:hunter2@redis.internal:6379 failed',
    'x-api-key: top-secret-value refused',
    'key ak_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG is unknown',
  ];
  for (const c of cases) {
    const text = errorText(new Error(c));
    assert.match(text, /\[redacted\]/, c);
    for (const secret of [
      'sk-abcdefghijklmnop1234',
      'AIzaSyA',
      'hunter2',
      'top-secret-value',
      'ak_0123456789',
    ])
      assert.ok(!text.includes(secret), `${c} -> ${text}`);
  }
});

test('bounded', () => {
  assert.ok(errorText(new Error('x'.repeat(100_000))).length <= 1001);
});

test('cloud credentials are masked: grant form fields, signed-URL parameters, key files, AWS key ids', () => {
  const cases: [string, string][] = [
    ['grant_type=client_credentials&client_secret=abc~DEF.123&scope=x', 'client_secret=[redacted]'],
    ['assertion=eyJhbGciOi.eyJpc3Mi.sig&grant_type=jwt', 'assertion=[redacted]'],
    ['GET /x?X-Amz-Security-Token=FQoGZXIvYXdzE&X-Amz-Signature=abcdef', 'X-Amz-Security-Token=[redacted]'],
    ['bad field secret_access_key: wJalrXUtnFEMI/K7MDENG', 'secret_access_key: [redacted]'],
    [
      '{"private_key":"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADAN\\n-----END PRIVATE KEY-----\\n"}',
      '[redacted]',
    ],
    ['credential AKIAIOSFODNN7EXAMPLE refused', 'credential [redacted] refused'],
  ];
  for (const [text, kept] of cases) {
    const out = errorText(new Error(text));
    assert.ok(out.includes(kept), `${out} keeps ${kept}`);
    for (const secret of [
      'abc~DEF',
      'eyJhbGciOi',
      'FQoGZXIvYXdzE',
      'abcdef',
      'wJalrXUtnFEMI',
      'MIIEvQIBADAN',
      'AKIAIOSFODNN7EXAMPLE',
    ]) {
      assert.equal(out.includes(secret), false, `${out} hides ${secret}`);
    }
  }
});

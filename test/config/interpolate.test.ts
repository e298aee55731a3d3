// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${ENV}` in plain strings is the configuration syntax under test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { interpolateString } from '../../config/interpolate.ts';

test('variables, defaults and escapes', () => {
  const env = { A: 'alpha', EMPTY: '' };
  assert.deepEqual(interpolateString('x-${A}-y', env), { value: 'x-alpha-y', problems: [] });
  assert.deepEqual(interpolateString('${B:-beta}', env), { value: 'beta', problems: [] });
  assert.deepEqual(interpolateString('${EMPTY:-fallback}', env), { value: 'fallback', problems: [] });
  assert.deepEqual(interpolateString('${B:-}', env), { value: '', problems: [] });
  assert.deepEqual(interpolateString('${B:-a:-b}', env), { value: 'a:-b', problems: [] });
  assert.deepEqual(interpolateString('$${A} and $A', env), { value: '${A} and $A', problems: [] });
  assert.deepEqual(interpolateString('${A}${A}', env), { value: 'alphaalpha', problems: [] });
});

test('missing, malformed and unterminated references are problems', () => {
  assert.deepEqual(interpolateString('${MISSING}', {}).problems, [
    'environment variable MISSING is not set (write ${MISSING:-default} to allow that)',
  ]);
  assert.deepEqual(interpolateString('${EMPTY}', { EMPTY: '' }).problems.length, 1, 'empty counts as unset');
  assert.deepEqual(interpolateString('pa${ss-word}', {}).problems, [
    'invalid environment variable reference (names are letters, digits and "_"; write "$${" for a literal "${")',
  ]);
  assert.deepEqual(interpolateString('abc ${OPEN', {}).problems, [
    'unterminated "${" (write "$${" for a literal "${")',
  ]);
});

test('a substituted value is never re-interpolated', () => {
  assert.deepEqual(interpolateString('${A}', { A: '${B}', B: 'no' }), { value: '${B}', problems: [] });
});

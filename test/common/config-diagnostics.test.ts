import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  childPointer,
  displayPath,
  formatDiagnostic,
  parentPointer,
  splitPointer,
} from '../../common/config-diagnostics.ts';
import { suggestKey } from '../../config/validate.ts';

test('diagnostics print as file:line:col: message', () => {
  assert.equal(formatDiagnostic({ file: 'a.yaml', line: 3, col: 7, message: 'bad' }), 'a.yaml:3:7: bad');
});

test('pointers escape and display like the YAML they came from', () => {
  const pointer = childPointer(childPointer(childPointer('', 'models'), 'gpt-5.5/x~y'), 0);
  assert.equal(pointer, '/models/gpt-5.5~1x~0y/0');
  assert.deepEqual(splitPointer(pointer), ['models', 'gpt-5.5/x~y', '0']);
  assert.equal(parentPointer(pointer), '/models/gpt-5.5~1x~0y');
  assert.equal(parentPointer('/a'), '');
  assert.equal(displayPath(pointer), 'models["gpt-5.5/x~y"][0]');
  assert.equal(displayPath('/billing/balance_enforcement/enabled'), 'billing.balance_enforcement.enabled');
  assert.equal(displayPath('/hooks/2/module'), 'hooks[2].module');
  assert.equal(displayPath(''), '(top level)');
});

test('suggestKey finds near misses only', () => {
  const known = ['enabled', 'base_url', 'api_key', 'balance_enforcement'];
  assert.equal(suggestKey('enabeld', known), 'enabled');
  assert.equal(suggestKey('baseurl', known), 'base_url');
  assert.equal(suggestKey('balance_enforcment', known), 'balance_enforcement');
  assert.equal(suggestKey('completely_different', known), undefined);
});

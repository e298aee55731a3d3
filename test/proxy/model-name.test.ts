import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_MODEL_NAME_LENGTH, modelNameProblem } from '../../proxy/model-name.ts';

test('real model ids pass', () => {
  for (const id of [
    'gpt-4o-2024-05-13',
    'meta-llama/Llama-3.1-8B-Instruct',
    'llama3:8b',
    'accounts/fireworks/models/x',
    'claude-opus-5@20261101',
    'ft:gpt-4o-mini:org::id',
    'anthropic.claude-3-5-sonnet-20240620-v1:0',
    'openai/gpt-4o:online',
    'a'.repeat(MAX_MODEL_NAME_LENGTH),
  ]) {
    assert.equal(modelNameProblem(id), undefined, id);
  }
});

test('each rule names its problem', () => {
  assert.match(modelNameProblem('') ?? '', /empty/);
  assert.match(modelNameProblem('a'.repeat(MAX_MODEL_NAME_LENGTH + 1)) ?? '', /longer than 256/);
  for (const id of ['a b', 'a?b', 'a#b', 'a%2F', 'a\nb', 'ü', 'a\\b', 'a"b']) {
    assert.match(modelNameProblem(id) ?? '', /character outside/, id);
  }
  for (const id of ['/a', 'a/', 'a//b']) assert.match(modelNameProblem(id) ?? '', /empty "\/" segment/, id);
  for (const id of ['.', '..', 'a/../b', 'a/./b', '../a']) {
    assert.match(modelNameProblem(id) ?? '', /"\." or "\.\." segment/, id);
  }
  assert.equal(modelNameProblem('a..b'), undefined, 'dots inside a segment are fine');
});

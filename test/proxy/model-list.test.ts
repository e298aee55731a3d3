// Each family's model list names only the models a client of that family can call: a model is listed
// when one of its providers has a rule for one of the family's apis.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ModelEntry } from '../../common/config-types.ts';
import type { ApiName } from '../../common/types.ts';
import { compileRegistry } from '../../config/models.ts';
import { createModelListing } from '../../proxy/model-list.ts';

const entry = (id: string, provider: string): ModelEntry => ({
  id,
  routes: [{ provider, model: undefined }],
  strategy: 'priority',
  ownedBy: undefined,
  listed: true,
});

test('a model whose provider serves only chat completions is not in the Gemini-shaped list', () => {
  const registry = compileRegistry([entry('chat-only-model', 'chatty'), entry('any-model', 'universal')]);
  const serves = (provider: string, api: ApiName) => provider === 'universal' || api === 'chat.completions';
  const listing = createModelListing(registry, serves, 1);
  const openai = listing.list('openai') as { data: { id: string }[] };
  assert.deepEqual(
    openai.data.map((m) => m.id),
    ['chat-only-model', 'any-model'],
  );
  const gemini = listing.list('gemini') as { models: { name: string }[] };
  assert.deepEqual(
    gemini.models.map((m) => m.name),
    ['models/any-model'],
  );
});

test('with every cell served, every family lists every model', () => {
  const registry = compileRegistry([entry('m1', 'p'), entry('m2', 'q')]);
  const listing = createModelListing(registry, () => true, 1);
  assert.equal((listing.list('openai') as { data: unknown[] }).data.length, 2);
  assert.equal((listing.list('gemini') as { models: unknown[] }).models.length, 2);
});

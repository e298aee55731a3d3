// biome-ignore-all lint/suspicious/noTemplateCurlyInString: `${ENV}` in plain strings is the configuration syntax under test.
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { test } from 'node:test';
import type { ModelEntry } from '../../common/config-types.ts';
import { compileRegistry, loadModelsFile, parseModelsSource } from '../../config/models.ts';

function entry(id: string, provider = 'p'): ModelEntry {
  return {
    id,
    routes: [{ provider, model: undefined }],
    strategy: 'priority',
    ownedBy: undefined,
    listed: !id.endsWith('*'),
  };
}

test('resolve prefers the exact id, then the longest prefix pattern', () => {
  const registry = compileRegistry([
    entry('*', 'catch-all'),
    entry('gpt-*', 'short'),
    entry('gpt-4o-*', 'long'),
    entry('gpt-4o-mini', 'exact'),
  ]);
  assert.equal(registry.resolve('gpt-4o-mini')?.routes[0]?.provider, 'exact');
  assert.equal(registry.resolve('gpt-4o-audio')?.routes[0]?.provider, 'long');
  assert.equal(
    registry.resolve('gpt-4o')?.routes[0]?.provider,
    'short',
    '"gpt-4o" does not start with "gpt-4o-"',
  );
  assert.equal(registry.resolve('llama-3')?.routes[0]?.provider, 'catch-all');
  assert.equal(compileRegistry([entry('gpt-*')]).resolve('claude-x'), undefined);
});

test('listed() holds exact ids in file order and never patterns', () => {
  const registry = compileRegistry([entry('b'), entry('x-*'), entry('a')]);
  assert.deepEqual(
    registry.listed().map((e) => e.id),
    ['b', 'a'],
  );
});

test('entries: provider names, {provider, model} routes, strategy default and owned_by', () => {
  const text = [
    'models:',
    '  alias:',
    '    providers:',
    '      - { provider: azure-openai, model: gpt-5.4-mini }',
    '      - openai',
    '    strategy: round_robin',
    '    owned_by: acme',
    '  "claude-*": { providers: [anthropic] }',
  ].join('\n');
  const { models, diagnostics } = parseModelsSource(text, '/m/models.yaml');
  assert.deepEqual(diagnostics, []);
  assert.equal(models.file, '/m/models.yaml');
  assert.deepEqual(models.entries, [
    {
      id: 'alias',
      routes: [
        { provider: 'azure-openai', model: 'gpt-5.4-mini' },
        { provider: 'openai', model: undefined },
      ],
      strategy: 'round_robin',
      ownedBy: 'acme',
      listed: true,
    },
    {
      id: 'claude-*',
      routes: [{ provider: 'anthropic', model: undefined }],
      strategy: 'priority',
      ownedBy: undefined,
      listed: false,
    },
  ]);
});

test('invalid entries are reported with line and column', () => {
  const text = [
    'models:', // 1
    '  a: { providers: [] }', // 2
    '  b:', // 3
    '    providers: [openai]', // 4
    '    strategy: random', // 5
    '  "c*d": { providers: [openai] }', // 6
    '  e: { providers: [openai, openai] }', // 7
    '  f: { providers: [{ model: x }] }', // 8
    '  g: { provider: [openai] }', // 9
    '  h: { providers: ["bad name"] }', // 10
  ].join('\n');
  const found = parseModelsSource(text, 'models.yaml').diagnostics.map(
    (d) => `${d.line}:${d.col} ${d.message}`,
  );
  assert.deepEqual(found, [
    '2:19 models.a.providers must NOT have fewer than 1 items',
    '5:15 models.b.strategy must be one of: round_robin, priority',
    '8:20 models.f.providers[0]: missing required key "provider"',
    '9:3 models.g: missing required key "providers"',
    '9:8 unknown key models.g.provider (did you mean "providers"?)',
    "10:20 models.h.providers[0] must be a provider name (letters, digits, '.', '_', '-')",
  ]);
  // Semantic checks run once the schema passes.
  const semantic = parseModelsSource(
    'models:\n  "c*d": { providers: [openai] }\n  e: { providers: [openai, openai] }\n',
    'models.yaml',
  ).diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`);
  assert.deepEqual(semantic, [
    '2:3 model id "c*d": "*" is only allowed once, at the end',
    '3:28 models.e.providers[1] repeats an earlier route',
  ]);
});

test('an empty models file or an empty mapping is an empty registry', () => {
  assert.deepEqual(parseModelsSource('', 'm.yaml'), {
    models: { file: 'm.yaml', entries: [] },
    diagnostics: [],
  });
  assert.deepEqual(parseModelsSource('models:\n', 'm.yaml').models.entries, []);
  assert.match(parseModelsSource('- a\n', 'm.yaml').diagnostics[0]!.message, /must be a mapping/);
});

test('models files interpolate ${ENV}', () => {
  const { models } = parseModelsSource(
    'models:\n  m: { providers: [{ provider: azure, model: "${DEPLOYMENT}" }] }\n',
    'm.yaml',
    {
      DEPLOYMENT: 'prod-gpt',
    },
  );
  assert.equal(models.entries[0]!.routes[0]!.model, 'prod-gpt');
});

test('the reference models.yaml routes every family to its provider', async () => {
  const file = resolve(import.meta.dirname, '../../deploy/config/models.yaml');
  const { models, diagnostics } = await loadModelsFile(file);
  assert.deepEqual(diagnostics, []);
  const registry = compileRegistry(models.entries);
  const expected: Record<string, string> = {
    'gpt-5.5': 'openai',
    'gpt-4.1-nano': 'openai',
    'o1-preview': 'openai',
    'o3-mini': 'openai',
    'o4-mini': 'openai',
    'text-embedding-ada-002': 'openai',
    'chatgpt-4o-latest': 'openai',
    'dall-e-3': 'openai',
    'gpt-image-1': 'openai',
    'whisper-1': 'openai',
    'tts-1-hd': 'openai',
    'claude-opus-5': 'anthropic',
    'claude-3-5-haiku-latest': 'anthropic',
    'gemini-3.8-flash': 'gemini',
    'gemini-2.0-flash': 'gemini',
  };
  for (const [model, provider] of Object.entries(expected)) {
    assert.equal(registry.resolve(model)?.routes[0]?.provider, provider, model);
  }
  assert.equal(registry.resolve('llama-4'), undefined);
  const listed = registry.listed().map((e) => e.id);
  assert.deepEqual(listed, [
    'gpt-5.5',
    'gpt-5.4',
    'gpt-5.4-mini',
    'o4-mini',
    'gpt-realtime',
    'gpt-realtime-mini',
    'text-embedding-3-small',
    'text-embedding-3-large',
    'claude-opus-5',
    'claude-sonnet-5',
    'claude-haiku-5-5',
    'gemini-3.8-pro',
    'gemini-3.8-flash',
    'gemini-embedding-001',
    'gemini-live-2.5-flash',
  ]);
  assert.ok(registry.listed().every((e) => e.ownedBy !== undefined));
});

// The provider files shipped in deploy/config/providers must compile cleanly and route every api they
// claim to the right upstream path.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ApiName } from '../../../common/types.ts';
import {
  defaultRegistries,
  formatDiagnostic,
  loadProviderDir,
  matchRule,
  renderTemplate,
} from '../../../hooks/dsl/index.ts';
import type { CompiledProvider } from '../../../hooks/dsl/types.ts';

const DIR = fileURLToPath(new URL('../../../deploy/config/providers/', import.meta.url));
const EXPECTED = [
  'anthropic',
  'azure-openai',
  'bedrock',
  'bedrock-converse',
  'deepseek',
  'gemini',
  'groq',
  'mistral',
  'ollama',
  'openai',
  'openrouter',
  'together',
  'vertex',
  'vllm',
  'xai',
];

async function load(env: Record<string, string> = {}) {
  return loadProviderDir(DIR, { registries: defaultRegistries(), env });
}

function route(p: CompiledProvider, api: ApiName, stream: boolean) {
  const rule = matchRule(p, api, stream);
  if (!rule) return undefined;
  const vars = { model: 'm', modelMapped: 'mm', requestId: 'r', api, provider: p.name };
  let path = '';
  const query: string[] = [];
  for (const op of rule.upstream) {
    if (op.op === 'set_path') path = renderTemplate(op.value, vars);
    if (op.op === 'set_query') query.push(`${op.name}=${renderTemplate(op.value, vars)}`);
  }
  return `${rule.upstreamConfig.baseUrl}${path}${query.length ? `?${query.join('&')}` : ''}`;
}

test('every shipped provider file compiles with the default registries and no diagnostics', async () => {
  const r = await load();
  assert.deepEqual(r.diagnostics.map(formatDiagnostic), []);
  assert.deepEqual([...r.providers.keys()].sort(), EXPECTED);
});

test('shipped routes: native passthrough and translated paths', async () => {
  const { providers } = await load();
  const p = (name: string) => providers.get(name) as CompiledProvider;
  assert.equal(route(p('openai'), 'chat.completions', true), 'https://api.openai.com/v1/chat/completions');
  assert.equal(
    route(p('openai'), 'audio.translations', false),
    'https://api.openai.com/v1/audio/translations',
  );
  // Every client family reaches every provider: Anthropic clients are translated for OpenAI.
  assert.equal(route(p('openai'), 'native.messages', false), 'https://api.openai.com/v1/chat/completions');
  assert.equal(
    route(p('gemini'), 'native.messages', true),
    'https://generativelanguage.googleapis.com/v1beta/models/mm:streamGenerateContent?alt=sse',
  );
  assert.equal(route(p('anthropic'), 'responses', true), 'https://api.anthropic.com/v1/messages');
  assert.equal(route(p('anthropic'), 'chat.completions', true), 'https://api.anthropic.com/v1/messages');
  assert.equal(
    route(p('gemini'), 'native.streamGenerateContent', true),
    'https://generativelanguage.googleapis.com/v1beta/models/mm:streamGenerateContent?alt=sse',
  );
  assert.equal(
    route(p('gemini'), 'chat.completions', true),
    'https://generativelanguage.googleapis.com/v1beta/models/mm:streamGenerateContent?alt=sse',
  );
  assert.equal(
    route(p('gemini'), 'chat.completions', false),
    'https://generativelanguage.googleapis.com/v1beta/models/mm:generateContent',
  );
  assert.equal(
    route(p('gemini'), 'embeddings', false),
    'https://generativelanguage.googleapis.com/v1beta/models/mm:batchEmbedContents',
  );
  // OpenAI Realtime clients on the Live API endpoint, through the realtime translator.
  const live =
    'https://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';
  assert.equal(route(p('gemini'), 'realtime', true), live);
  assert.equal(route(p('gemini'), 'native.live', true), live);
  assert.deepEqual(matchRule(p('gemini'), 'realtime', true)?.request, [
    { op: 'req_map', translator: 'openai_realtime_to_gemini_live' },
  ]);
  assert.equal(
    route(p('azure-openai'), 'chat.completions', false),
    'https://your-resource.openai.azure.com/openai/deployments/mm/chat/completions?api-version=2024-10-21',
  );
  assert.equal(route(p('ollama'), 'native.messages', true), 'http://127.0.0.1:11434/v1/chat/completions');
  assert.equal(
    route(p('deepseek'), 'chat.completions', false),
    'https://api.deepseek.com/v1/chat/completions',
  );
  assert.equal(
    route(p('groq'), 'chat.completions', false),
    'https://api.groq.com/openai/v1/chat/completions',
  );
});

test('streamed OpenAI-style chat asks for usage and strips the injected chunk again', async () => {
  const { providers } = await load();
  for (const name of [
    'openai',
    'azure-openai',
    'deepseek',
    'groq',
    'openrouter',
    'together',
    'xai',
    'ollama',
    'vllm',
  ]) {
    const rule = matchRule(providers.get(name) as CompiledProvider, 'chat.completions', true);
    assert.ok(rule, name);
    assert.ok(
      rule.request.some(
        (o) => o.op === 'json_set' && o.path.join('.') === 'stream_options.include_usage' && o.value === true,
      ),
      name,
    );
    assert.ok(
      rule.response.some((o) => o.op === 'sse_parse' && o.transform === 'openai_usage_strip'),
      name,
    );
    const plain = matchRule(providers.get(name) as CompiledProvider, 'chat.completions', false);
    assert.ok(plain && !plain.request.some((o) => o.op === 'json_set'), name);
  }
});

test('OpenAI-compatible providers serve Anthropic and Gemini clients through translators', async () => {
  const { providers } = await load();
  for (const name of ['deepseek', 'groq', 'mistral', 'openrouter', 'together', 'xai', 'ollama', 'vllm']) {
    const p = providers.get(name) as CompiledProvider;
    for (const [api, translator] of [
      ['native.messages', 'anthropic_to_openai'],
      ['native.generateContent', 'gemini_to_openai'],
      ['native.streamGenerateContent', 'gemini_to_openai'],
    ] as const) {
      const rule = matchRule(p, api, api === 'native.streamGenerateContent');
      assert.ok(
        rule?.request.some((o) => o.op === 'req_map' && o.translator === translator),
        `${name} ${api}`,
      );
    }
    assert.deepEqual(
      matchRule(p, 'native.messages', false)?.metrics,
      [{ op: 'usage_extract', preset: 'openai_chat_completions' }],
      name,
    );
  }
});

test('the env override re-points a shipped provider', async () => {
  const { providers, diagnostics } = await load({
    ROUTER_PROVIDER_AZURE_OPENAI_BASE_URL: 'https://mine.openai.azure.com/',
  });
  assert.deepEqual(diagnostics, []);
  const p = providers.get('azure-openai') as CompiledProvider;
  assert.ok(p.rules.every((r) => r.upstreamConfig.baseUrl === 'https://mine.openai.azure.com'));
});

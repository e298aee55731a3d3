// The shipped vertex.conf: its host for a regional and the global location (a base_url host that starts
// with `${provider.location}-` loses that label for `global`), the environment override, and which
// publisher each model id reaches.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadPricing } from '../../../billing/pricing.ts';
import { compileRegistry, loadModelsFile } from '../../../config/models.ts';
import { compileProviderSource, defaultRegistries, matchRule } from '../../../hooks/dsl/index.ts';
import { MODELS_FILE, PRICING_FILE, PROVIDERS_DIR } from '../../support/stack.ts';

const SOURCE = readFileSync(join(PROVIDERS_DIR, 'vertex.conf'), 'utf8');

function compile(env: Record<string, string>) {
  const r = compileProviderSource('vertex.conf', SOURCE, { registries: defaultRegistries(), env });
  assert.deepEqual(r.diagnostics, []);
  return r.provider!;
}

test('the host is <location>-aiplatform.googleapis.com, and aiplatform.googleapis.com for global', () => {
  const regional = compile({ ROUTER_PROVIDER_VERTEX_LOCATION: 'us-east5' });
  assert.equal(regional.rules[0]!.upstreamConfig.baseUrl, 'https://us-east5-aiplatform.googleapis.com');
  const global = compile({ ROUTER_PROVIDER_VERTEX_LOCATION: 'global' });
  for (const rule of global.rules)
    assert.equal(rule.upstreamConfig.baseUrl, 'https://aiplatform.googleapis.com');
  assert.deepEqual(global.baseUrlSettings, ['location']);
  const overridden = compile({
    ROUTER_PROVIDER_VERTEX_LOCATION: 'global',
    ROUTER_PROVIDER_VERTEX_BASE_URL: 'http://127.0.0.1:9/prefix',
  });
  assert.equal(overridden.rules[0]!.upstreamConfig.baseUrl, 'http://127.0.0.1:9/prefix');
});

test('only a host label is dropped: "global" elsewhere in a base_url stays', () => {
  const src = (host: string) => `syntax "next-router/0.1";
provider "g" {
  defaults { upstream_config { base_url = template("${host}"); } auth { auth_google; } }
  match api = "chat.completions" { upstream { set_path "/x"; } }
}
`;
  const env = { ROUTER_PROVIDER_G_LOCATION: 'global' };
  const base = (host: string) =>
    compileProviderSource('g.conf', src(host), { registries: defaultRegistries(), env }).provider!.rules[0]!
      .upstreamConfig.baseUrl;
  assert.equal(
    base('https://$' + '{provider.location}-documentai.googleapis.com'),
    'https://documentai.googleapis.com',
  );
  assert.equal(
    base('https://api.example.com/$' + '{provider.location}-x'),
    'https://api.example.com/global-x',
  );
  assert.equal(base('https://$' + '{provider.location}.example.com'), 'https://global.example.com');
});

test('claude* ids reach the Anthropic publisher, every other id the Google publisher', () => {
  const provider = compile({ ROUTER_PROVIDER_VERTEX_LOCATION: 'us-east5' });
  const pathOf = (api: Parameters<typeof matchRule>[1], stream: boolean, model: string) => {
    const rule = matchRule(provider, api, stream, model);
    assert.ok(rule, `${api} ${stream} ${model}`);
    const op = rule.upstream.find((o) => o.op === 'set_path');
    return op?.op === 'set_path' ? op.value.source : '';
  };
  const claude = 'claude-sonnet-4-5@20250929';
  for (const api of ['chat.completions', 'responses', 'native.messages'] as const) {
    assert.match(
      pathOf(api, false, claude),
      /publishers\/anthropic\/models\/\$\{request\.model_mapped\}:rawPredict$/,
    );
    assert.match(pathOf(api, true, claude), /:streamRawPredict$/);
    assert.match(pathOf(api, false, 'gemini-2.5-pro'), /publishers\/google\/.*:generateContent$/);
    assert.match(pathOf(api, true, 'gemini-2.5-pro'), /publishers\/google\/.*:streamGenerateContent$/);
  }
  assert.match(pathOf('native.generateContent', false, claude), /:rawPredict$/);
  assert.match(pathOf('native.streamGenerateContent', true, claude), /:streamRawPredict$/);
  for (const api of ['messages.count_tokens', 'native.countTokens', 'responses.input_tokens'] as const) {
    assert.match(pathOf(api, false, claude), /publishers\/anthropic\/models\/count-tokens:rawPredict$/);
    assert.match(pathOf(api, false, 'gemini-2.5-flash'), /publishers\/google\/.*:countTokens$/);
  }
});

test("the shipped registry sends Vertex's Claude ids (<model>@<version>) to vertex, priced with cache reads and writes", async () => {
  const { models } = await loadModelsFile(MODELS_FILE);
  const registry = compileRegistry(models.entries);
  assert.equal(registry.resolve('claude-sonnet-5@20261001')?.routes[0]?.provider, 'vertex');
  assert.equal(registry.resolve('claude-sonnet-5')?.routes[0]?.provider, 'anthropic');
  const { pricing } = await loadPricing([PRICING_FILE]);
  const cost = pricing.lookup('vertex', 'claude-sonnet-5@20261001')?.unitPrices;
  assert.ok(cost?.cache_read !== undefined && cost.cache_creation !== undefined, JSON.stringify(cost));
  assert.ok(pricing.lookup('vertex', 'gemini-3.8-flash-002') !== undefined);
});

// The shipped bedrock.conf and bedrock-converse.conf: the host from the region, and which Bedrock API
// each model id (foundation id, inference profile, ARN) reaches for every client api, and with which
// translator.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ApiName } from '../../../common/types.ts';
import {
  compileProviderSource,
  defaultRegistries,
  matchRule,
  renderTemplate,
} from '../../../hooks/dsl/index.ts';
import { bedrockApiFor } from '../../../hooks/families/bedrock/index.ts';
import { PROVIDERS_DIR } from '../../support/stack.ts';

function compile(name: string, env: Record<string, string>) {
  const source = readFileSync(join(PROVIDERS_DIR, `${name}.conf`), 'utf8');
  const r = compileProviderSource(`${name}.conf`, source, { registries: defaultRegistries(), env });
  assert.deepEqual(r.diagnostics, []);
  return r.provider!;
}

const GENERATION: readonly [ApiName, string, readonly boolean[]][] = [
  ['native.messages', 'anthropic', [false, true]],
  ['chat.completions', 'openai', [false, true]],
  ['responses', 'responses', [false, true]],
  ['native.generateContent', 'gemini', [false]],
  ['native.streamGenerateContent', 'gemini', [true]],
];
const COUNTING: readonly [ApiName, string][] = [
  ['messages.count_tokens', 'anthropic'],
  ['native.countTokens', 'gemini'],
  ['responses.input_tokens', 'responses'],
];
const MODELS = [
  'anthropic.claude-sonnet-5-v1:0',
  'us.anthropic.claude-sonnet-5-v1:0',
  'global.anthropic.claude-opus-5-v1:0',
  'arn:aws:bedrock:us-east-1:123456789012:inference-profile/eu.anthropic.claude-haiku-5-5-v1:0',
  'amazon.nova-pro-v1:0',
  'meta.llama4-maverick-17b-instruct-v1:0',
];

function route(provider: ReturnType<typeof compile>, api: ApiName, stream: boolean, model: string) {
  const rule = matchRule(provider, api, stream, model);
  assert.ok(rule, `${provider.name} ${api} stream=${stream} ${model}`);
  const vars = { model, modelMapped: model, requestId: 'r', api, provider: provider.name };
  const setPath = rule.upstream.find((o) => o.op === 'set_path');
  const reqMap = rule.request.find((o) => o.op === 'req_map');
  return {
    url: `${rule.upstreamConfig.baseUrl}${setPath?.op === 'set_path' ? renderTemplate(setPath.value, vars, 'path') : ''}`,
    translator: reqMap?.op === 'req_map' ? reqMap.translator : undefined,
  };
}

test('the host is bedrock-runtime.<region>.amazonaws.com; the base URL variable replaces it', () => {
  for (const name of ['bedrock', 'bedrock-converse']) {
    const env = name.toUpperCase().replace('-', '_');
    const p = compile(name, { [`ROUTER_PROVIDER_${env}_REGION`]: 'eu-central-1' });
    for (const rule of p.rules)
      assert.equal(rule.upstreamConfig.baseUrl, 'https://bedrock-runtime.eu-central-1.amazonaws.com');
    const fallback = compile(name, { AWS_REGION: 'us-west-2' });
    assert.equal(
      fallback.rules[0]!.upstreamConfig.baseUrl,
      'https://bedrock-runtime.us-west-2.amazonaws.com',
    );
    const local = compile(name, {
      AWS_REGION: 'us-west-2',
      [`ROUTER_PROVIDER_${env}_BASE_URL`]: 'http://127.0.0.1:9',
    });
    assert.equal(local.rules[0]!.upstreamConfig.baseUrl, 'http://127.0.0.1:9');
  }
});

test('bedrock: Claude ids through InvokeModel, others through Converse; the id is one encoded segment', () => {
  const p = compile('bedrock', { AWS_REGION: 'us-east-1' });
  for (const model of MODELS) {
    const api = bedrockApiFor(model);
    const segment = encodeURIComponent(model);
    for (const [clientApi, family, streams] of GENERATION) {
      for (const stream of streams) {
        const action =
          api === 'invoke'
            ? stream
              ? 'invoke-with-response-stream'
              : 'invoke'
            : stream
              ? 'converse-stream'
              : 'converse';
        const { url, translator } = route(p, clientApi, stream, model);
        assert.equal(
          url,
          `https://bedrock-runtime.us-east-1.amazonaws.com/model/${segment}/${action}`,
          `${clientApi} ${model}`,
        );
        assert.equal(translator, `${family}_to_bedrock_${api}`);
      }
    }
    for (const [clientApi, family] of COUNTING) {
      const { url, translator } = route(p, clientApi, false, model);
      assert.ok(url.endsWith(`/model/${segment}/count-tokens`));
      assert.equal(translator, `${family}_count_to_bedrock_${api}`);
    }
  }
});

test('bedrock-converse: every id through Converse', () => {
  const p = compile('bedrock-converse', { AWS_REGION: 'us-east-1' });
  for (const model of MODELS) {
    for (const [clientApi, family, streams] of GENERATION) {
      for (const stream of streams) {
        const { url, translator } = route(p, clientApi, stream, model);
        assert.ok(url.endsWith(stream ? '/converse-stream' : '/converse'), url);
        assert.equal(translator, `${family}_to_bedrock_converse`);
      }
    }
    for (const [clientApi, family] of COUNTING)
      assert.equal(route(p, clientApi, false, model).translator, `${family}_count_to_bedrock_converse`);
  }
});

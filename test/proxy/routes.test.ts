// The route table assembled from the wire families' declared routes resolves as the gateway's
// endpoints are documented (docs/operations.md), family by family.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveRoute } from '../../proxy/routes.ts';

const WEBHOOK = '/billing/webhook';
const route = (method: string, path: string, carrier: string | undefined = undefined) =>
  resolveRoute(method, path, carrier, WEBHOOK);

test('fixed POST routes carry their api, client family and body kind', () => {
  assert.deepEqual(route('POST', '/v1/chat/completions'), {
    kind: 'proxy',
    api: 'chat.completions',
    format: 'openai',
    body: 'json',
  });
  assert.deepEqual(route('POST', '/v1/messages'), {
    kind: 'proxy',
    api: 'native.messages',
    format: 'anthropic',
    body: 'json',
  });
  assert.equal((route('POST', '/v1/audio/transcriptions') as { body: string }).body, 'multipart');
  // The Responses API is a family of its own: its stream errors are typed `error` events.
  assert.equal((route('POST', '/v1/responses') as { format: string }).format, 'responses');
});

test('a model-in-path route decodes the model and rebuilds the upstream path', () => {
  const r = route('POST', '/v1beta/models/a%2Fb%3Fx:streamGenerateContent');
  assert.equal(r.kind, 'proxy');
  if (r.kind !== 'proxy') return;
  assert.equal(r.api, 'native.streamGenerateContent');
  assert.equal(r.format, 'gemini');
  assert.equal(r.pathModel, 'a/b?x');
  assert.equal(r.pathAction, 'streamGenerateContent');
  assert.equal(r.upstreamPath, '/v1beta/models/a%2Fb%3Fx:streamGenerateContent');
  assert.equal(r.pathStream, true);
  assert.equal(
    (route('POST', '/v1/models/m:generateContent') as { api: string }).api,
    'native.generateContent',
  );
  assert.deepEqual(route('POST', '/v1beta/models/%E0%A4:generateContent'), {
    kind: 'bad_path',
    format: 'gemini',
  });
});

test('model lists answer in the shape of the family the key carrier names', () => {
  assert.deepEqual(route('GET', '/v1/models'), { kind: 'models', format: 'openai' });
  assert.deepEqual(route('GET', '/v1/models', 'anthropic'), { kind: 'models', format: 'anthropic' });
  assert.deepEqual(route('GET', '/v1/models', 'gemini'), { kind: 'models', format: 'gemini' });
  assert.deepEqual(route('GET', '/v1beta/models'), { kind: 'models', format: 'gemini' });
  assert.deepEqual(route('GET', '/v1/models/gpt-x'), { kind: 'model', format: 'openai', id: 'gpt-x' });
  assert.deepEqual(route('HEAD', '/v1/models/m', 'gemini'), { kind: 'model', format: 'gemini', id: 'm' });
  assert.deepEqual(route('GET', '/v1/models/m', 'anthropic'), {
    kind: 'model',
    format: 'anthropic',
    id: 'm',
  });
  assert.deepEqual(route('GET', '/v1beta/models/a%20b'), { kind: 'model', format: 'gemini', id: 'a b' });
  assert.deepEqual(route('GET', '/v1/models/%E0'), { kind: 'bad_path', format: 'openai' });
});

test('wrong methods and unknown paths get the error shape of the family owning the path', () => {
  assert.deepEqual(route('GET', '/v1/messages'), {
    kind: 'method_not_allowed',
    format: 'anthropic',
    allow: 'POST',
  });
  assert.deepEqual(route('GET', '/v1beta/models/m:generateContent'), {
    kind: 'method_not_allowed',
    format: 'gemini',
    allow: 'POST',
  });
  assert.deepEqual(route('PUT', '/v1/chat/completions'), {
    kind: 'method_not_allowed',
    format: 'openai',
    allow: 'POST',
  });
  assert.deepEqual(route('GET', WEBHOOK), { kind: 'method_not_allowed', format: 'openai', allow: 'POST' });
  assert.deepEqual(route('GET', '/v1beta/unknown'), { kind: 'not_found', format: 'gemini' });
  assert.deepEqual(route('POST', '/nope'), { kind: 'not_found', format: 'openai' });
  assert.deepEqual(route('GET', '/healthz'), { kind: 'healthz' });
  assert.deepEqual(route('POST', WEBHOOK), { kind: 'webhook' });
});

// The rule hook's JSON ops through a real gateway and the upstream simulator: json_set and json_del
// build what docs/dsl.md describes, and never change the client's body (a retry on the next provider
// starts from the original).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { modelsWith, simProvider } from '../../support/sim-providers.ts';
import { postJson, type Stack, startStack } from '../../support/stack.ts';

/** simProvider(name) with extra ops at the start of its defaults' request block. */
function withOps(name: string, ops: string): string {
  const src = simProvider(name);
  const marker = 'request { set_header';
  assert.ok(src.includes(marker));
  return src.replace(marker, `request { ${ops} set_header`);
}

let stack: Stack;

before(async () => {
  stack = await startStack({
    providers: {
      'ops-a': withOps(
        'ops-a',
        'json_set "$.extra[0]" "x"; json_set "$.tags[1]" "from-a"; json_set "$.meta.deep.n" 1; json_del "$.drop.me";',
      ),
      'ops-b': simProvider('ops-b'),
      // A translated rule whose upstream answers 2xx JSON the translator cannot read: Gemini's stream
      // without alt=sse is one JSON array, not the object generateContent returns.
      'bad-reply': `syntax "next-router/0.1";
provider "bad-reply" {
  defaults { upstream_config { base_url = "http://127.0.0.1:1"; } auth { auth_bearer; } }
  match api = "chat.completions" {
    request { req_map openai_to_gemini; }
    upstream { set_path template("/v1beta/models/\${request.model_mapped}:streamGenerateContent"); }
    response { resp_map openai_to_gemini; }
  }
}
`,
    },
    modelsYaml: modelsWith([
      'ops-model: { providers: [ops-a] }',
      'ops-retry: { providers: [ops-a, ops-b] }',
      'bad-reply-model: { providers: [bad-reply] }',
    ]),
  });
});
after(() => stack.close());

function chat(model: string): Record<string, unknown> {
  return {
    model,
    messages: [{ role: 'user', content: 'hi' }],
    tags: ['client'],
    drop: { me: true, keep: true },
  };
}

test('json_set "$.extra[0]" reaches the upstream as an array; nested objects are created; json_del removes', async () => {
  const res = await postJson(`${stack.url}/v1/chat/completions`, chat('ops-model'));
  assert.equal(res.status, 200, res.text);
  const up = stack.sim.requests.at(-1)?.json as Record<string, unknown>;
  assert.deepEqual(up.extra, ['x']);
  assert.deepEqual(up.tags, ['client', 'from-a']);
  assert.deepEqual(up.meta, { deep: { n: 1 } });
  assert.deepEqual(up.drop, { keep: true });
});

test("the ops never change the client's body: the retry on the next provider gets the original", async () => {
  const key = 'provider-rule-cow';
  const res = await postJson(`${stack.url}/v1/chat/completions`, chat('ops-retry'), {
    'x-sim-fail': '503',
    'x-sim-fail-times': '1',
    'x-sim-fail-key': key,
  });
  assert.equal(res.status, 200, res.text);
  const ups = stack.sim.requests.filter((r) => r.headers['x-sim-fail-key'] === key);
  assert.deepEqual(
    ups.map((r) => r.headers['x-test-provider']),
    ['ops-a', 'ops-b'],
  );
  const second = ups[1]!.json as Record<string, unknown>;
  assert.deepEqual(second.tags, ['client']);
  assert.deepEqual(second.drop, { me: true, keep: true });
  assert.equal(second.extra, undefined);
  assert.equal(second.meta, undefined);
});

test("a 2xx reply the translator cannot read is 502 upstream_bad_response in the client's shape, not a 500", async () => {
  const res = await postJson(`${stack.url}/v1/chat/completions`, {
    model: 'bad-reply-model',
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(res.status, 502, res.text);
  const body = JSON.parse(res.text) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'upstream_bad_response');
  assert.match(body.error.message, /cannot be translated/);
});

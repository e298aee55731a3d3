import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';
import type { JsonObject } from '../../../../common/types.ts';
import { responsesToOpenai } from '../../../../hooks/families/responses/responses-to-openai.ts';
import { TranslationError } from '../../../../hooks/translators/types.ts';
import {
  makeInit,
  parseSse,
  replay,
  runGoldenCase,
} from '../../../fixtures/translators/anthropic/harness.ts';

const FIXTURES = new URL('../../../fixtures/translators/responses/responses-to-openai/', import.meta.url);
const UPSTREAM_MODEL = 'claude-sonnet-4-5';

test('factory identity', () => {
  assert.equal(responsesToOpenai.name, 'responses_to_openai');
  assert.equal(responsesToOpenai.from, 'responses');
  assert.equal(responsesToOpenai.to, 'openai');
});

const cases = readdirSync(FIXTURES, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);
test('fixture cases exist', () => {
  for (const name of [
    'text-json',
    'history-stream',
    'parallel-tools-stream',
    'length-stream',
    'error-mid-stream',
  ]) {
    assert.ok(cases.includes(name), name);
  }
});
for (const name of cases) {
  test(`golden: ${name}`, () => {
    const checked = runGoldenCase(responsesToOpenai, new URL(`${name}/`, FIXTURES), UPSTREAM_MODEL);
    assert.ok(checked.length >= 2, `case ${name} checks a reply, not only the request`);
  });
}

function create(request: JsonObject) {
  return responsesToOpenai.create(makeInit(request, UPSTREAM_MODEL));
}

test('state the gateway does not resolve and hosted features are refused with the field named, never dropped', () => {
  const input = 'hi';
  const cases: [JsonObject, string][] = [
    [{ model: 'm', input, previous_response_id: 'resp_1' }, 'previous_response_id'],
    [{ model: 'm', input, conversation: 'conv_1' }, 'conversation'],
    [{ model: 'm', input, background: true }, 'background'],
    [{ model: 'm', input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input[0].type'],
    [{ model: 'm', input, tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [
      { model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] },
      'input[0].content[0].image_url',
    ],
    [
      { model: 'm', input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] },
      'input[0].content[0].type',
    ],
  ];
  for (const [body, field] of cases) {
    assert.throws(
      () => create(body).request(body),
      (err) => err instanceof TranslationError && err.field === field,
      `expected a refusal naming ${field}`,
    );
  }
  // Storing is the gateway's (hooks/builtin/response-state.ts): either value passes the translator.
  for (const store of [true, false]) {
    assert.doesNotThrow(() => create({ model: 'm', input }).request({ model: 'm', input, store }));
  }
});

test('a stream event sequence numbers strictly increase and every event names its own type', () => {
  const request = { model: 'claude-sonnet', stream: true, input: 'hi' };
  const translator = create(request);
  translator.request(request);
  const chunk = (delta: JsonObject, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: 'c1', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const out = replay(
    translator,
    `${chunk({ content: 'a' })}${chunk({ content: 'b' }, 'stop')}data: [DONE]\n\n`,
    true,
  );
  const seqs = out.map((ev) => (JSON.parse(ev.data) as { sequence_number: number }).sequence_number);
  assert.deepEqual(
    seqs,
    seqs.map((_, i) => i),
  );
  for (const ev of out) assert.equal((JSON.parse(ev.data) as { type: string }).type, ev.event);
  assert.equal(out.at(-1)?.event, 'response.completed');
  const completed = JSON.parse(out.at(-1)!.data) as {
    response: { output: { content: { text: string }[] }[] };
  };
  assert.equal(completed.response.output[0]?.content[0]?.text, 'ab');
});

test('an upstream error chunk mid-stream becomes one Responses error event, and nothing after it', () => {
  const request = { model: 'claude-sonnet', stream: true, input: 'hi' };
  const translator = create(request);
  translator.request(request);
  const events = parseSse(
    'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"a"}}]}\n\n' +
      'data: {"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}\n\n',
  );
  const out = events.flatMap((ev) => translator.streamEvent(ev.event, ev.data));
  out.push(...translator.streamEnd(false));
  const errors = out.filter((ev) => ev.event === 'error');
  assert.equal(errors.length, 1);
  const error = JSON.parse(errors[0]!.data) as {
    type: string;
    code: string;
    message: string;
    error: { type: string };
  };
  assert.equal(error.type, 'error');
  assert.equal(error.code, 'overloaded');
  assert.match(error.message, /^overloaded \(request id: /);
  assert.equal(error.error.type, 'server_error');
  assert.equal(out.at(-1)?.event, 'error');
});

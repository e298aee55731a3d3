// Stored responses keep prompts and replies in the store only: a gateway logging at `trace` and exporting
// every span, serving Responses turns that are stored, resolved, refused (an unknown id) and too large to
// store, writes none of their text to its log or its spans; the log says why a reply was not stored by
// its id and size.

import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import { type OtlpReceiver, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { ACCESS_KEY, postJson, type Stack, startStack } from '../support/stack.ts';

const PROMPT = 'okapi-vermilion prompt that stays in the store';
const BIG = `walrus-cobalt ${'x'.repeat(4000)}`;

let receiver: OtlpReceiver;
let stack: Stack;
const logged: string[] = [];

before(async () => {
  receiver = await startOtlpReceiver();
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged.push(chunk.toString('utf8'));
      done();
    },
  });
  stack = await startStack({
    logger: pino({ level: 'trace' }, sink),
    extraYaml: 'responses: { store_max_bytes: 2048 }',
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '20',
    },
  });
});
after(async () => {
  await stack?.close();
  await receiver?.close();
});

test('stored, resolved, refused and oversized turns leave no prompt or reply text in logs or spans', async () => {
  const url = `${stack.url}/v1/responses`;
  const one = await postJson(
    url,
    { model: 'claude-sonnet-5', input: PROMPT },
    { 'x-router-request-id': 'priv-1' },
  );
  assert.equal(one.status, 200, one.text);
  const body = one.json as { id: string; output: { id: string }[] };
  const two = await postJson(
    url,
    {
      model: 'gemini-3.8-flash',
      previous_response_id: body.id,
      input: [
        { type: 'item_reference', id: body.output[0]!.id },
        { role: 'user', content: PROMPT },
      ],
      stream: true,
    },
    { 'x-router-request-id': 'priv-2' },
  );
  assert.equal(two.status, 200, two.text);
  const missing = await postJson(
    url,
    { model: 'claude-sonnet-5', previous_response_id: 'resp_unknown', input: PROMPT },
    { 'x-router-request-id': 'priv-3' },
  );
  assert.equal(missing.status, 404);
  const big = await postJson(
    url,
    { model: 'claude-sonnet-5', input: BIG },
    { 'x-router-request-id': 'priv-4' },
  );
  assert.equal(big.status, 200, big.text);
  const bigId = (big.json as { id: string }).id;
  // Too large to store: served, then not found.
  const again = await fetch(`${url}/${bigId}`, { headers: { authorization: `Bearer ${ACCESS_KEY}` } });
  assert.equal(again.status, 404);

  const ids = ['priv-1', 'priv-2', 'priv-3', 'priv-4'];
  await receiver.waitFor((spans) =>
    ids.every((id) => spans.some((s) => s.kind === 2 && s.attributes['router.request_id'] === id)),
  );
  const log = logged.join('');
  const spans = JSON.stringify(receiver.spans);
  const replyText = JSON.stringify(body.output).match(/Echo: [^"]{0,40}/)?.[0];
  assert.ok(replyText !== undefined);
  for (const text of [PROMPT, 'walrus-cobalt', replyText]) {
    assert.equal(log.includes(text), false, `log holds ${text}`);
    assert.equal(spans.includes(text), false, `spans hold ${text}`);
  }
  const notStored = logged
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .find((l) => typeof l.msg === 'string' && l.msg.startsWith('response not stored'));
  assert.equal(notStored?.responseId, bigId);
  assert.ok(Number(notStored?.bytes) > 2048);
});

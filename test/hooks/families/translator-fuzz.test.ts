// Every registered translator (each family's own, the pivot compositions and the counting ones) against
// hostile upstream replies: stream events of any shape, JSON or not, in any order, a stream that ends
// anywhere, and error bodies of any shape. A translator never throws on them, every event it emits is
// one line of JSON (or the completion-style [DONE]), and an incomplete stream always ends with an event.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { GatewayError } from '../../../common/errors.ts';
import type { JsonObject, JsonValue, SseOut } from '../../../common/types.ts';
import { TRANSLATORS } from '../../../hooks/families/index.ts';

const EVENT_NAMES = [
  undefined,
  'message_start',
  'content_block_start',
  'content_block_delta',
  'content_block_stop',
  'message_delta',
  'message_stop',
  'error',
  'ping',
  'response.completed',
];

/** Fragments that look like each vendor's stream events, so translators get past their first checks. */
const shaped = fc.oneof(
  fc.record({ type: fc.constantFrom('message_start', 'content_block_delta', 'message_delta', 'error') }),
  fc.record({
    type: fc.constant('content_block_delta'),
    index: fc.integer({ min: -1, max: 3 }),
    delta: fc.record({
      type: fc.constantFrom('text_delta', 'input_json_delta', 'thinking_delta'),
      text: fc.string(),
    }),
  }),
  fc.record({
    choices: fc.array(
      fc.record({
        index: fc.integer({ min: 0, max: 2 }),
        delta: fc.dictionary(
          fc.constantFrom('content', 'reasoning_content', 'tool_calls', 'role'),
          fc.jsonValue({ maxDepth: 2 }),
        ),
        finish_reason: fc.oneof(
          fc.constant(null),
          fc.constantFrom('stop', 'length', 'tool_calls', 'content_filter'),
        ),
      }),
      { maxLength: 2 },
    ),
  }),
  fc.record({
    candidates: fc.array(
      fc.record({
        content: fc.record({
          parts: fc.array(
            fc.dictionary(fc.constantFrom('text', 'thought', 'functionCall'), fc.jsonValue({ maxDepth: 2 })),
          ),
        }),
        finishReason: fc.constantFrom('STOP', 'MAX_TOKENS', 'SAFETY'),
      }),
      { maxLength: 2 },
    ),
  }),
  fc.record({ error: fc.jsonValue({ maxDepth: 2 }) }),
);

const data = fc.oneof(
  shaped.map((v) => JSON.stringify(v)),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 30 }),
  fc.constant('[DONE]'),
);

const events = fc.array(fc.record({ event: fc.constantFrom(...EVENT_NAMES), data }), { maxLength: 12 });

function assertWellFormed(name: string, out: readonly SseOut[]): void {
  for (const ev of out) {
    assert.ok(!ev.data.includes('\n'), `${name}: data must be one line`);
    if (ev.data !== '[DONE]') assert.doesNotThrow(() => JSON.parse(ev.data), `${name}: ${ev.data}`);
  }
}

function requestFor(name: string): JsonObject {
  const from = TRANSLATORS.get(name)!.from;
  if (name.includes('embeddings')) return { model: 'm', input: 'hi' };
  if (from === 'anthropic')
    return { model: 'm', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'hi' }] };
  if (from === 'gemini') return { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] };
  if (from === 'responses') return { model: 'm', stream: true, input: 'hi' };
  return { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] };
}

for (const name of TRANSLATORS.keys()) {
  test(`${name}: hostile upstream streams and error bodies never break it`, () => {
    fc.assert(
      fc.property(
        events,
        fc.boolean(),
        fc.integer({ min: 400, max: 599 }),
        fc.jsonValue({ maxDepth: 3 }),
        (evs, complete, status, body) => {
          const translator = TRANSLATORS.get(name)!.create({
            requestId: 'req_fuzz',
            model: 'm',
            upstreamModel: 'm',
            stream: true,
            createdAt: 1760000000,
          });
          translator.request(requestFor(name));
          const out: SseOut[] = [];
          for (const ev of evs) out.push(...translator.streamEvent(ev.event, ev.data));
          const end = translator.streamEnd(complete);
          out.push(...end);
          assertWellFormed(name, out);
          if (!complete && !name.includes('_count_') && !name.includes('embeddings')) {
            assert.ok(out.length > 0, `${name}: an incomplete stream ends with an event`);
          }
          let error: JsonValue;
          try {
            error = translator.error(status, body as JsonValue);
          } catch (err) {
            // A catalogue error is an answer (a provider's throttling: upstream_rate_limited), not a crash.
            if (err instanceof GatewayError && err.code === 'upstream_rate_limited') return;
            throw err;
          }
          assert.doesNotThrow(() => JSON.stringify(error));
        },
      ),
      { numRuns: 150 },
    );
  });
}

for (const name of TRANSLATORS.keys()) {
  test(`${name}: any 2xx JSON reply is translated or refused with an error, never a crash of another kind`, () => {
    fc.assert(
      fc.property(fc.oneof(shaped, fc.jsonValue({ maxDepth: 3 })), (body) => {
        const translator = TRANSLATORS.get(name)!.create({
          requestId: 'req_fuzz',
          model: 'm',
          upstreamModel: 'm',
          stream: false,
          createdAt: 1760000000,
        });
        translator.request({ ...requestFor(name), stream: false });
        try {
          assert.doesNotThrow(() => JSON.stringify(translator.response(body as JsonValue)));
        } catch (err) {
          // The rule hook turns a reply the translator cannot read into 502 upstream_bad_response.
          assert.ok(err instanceof Error, `${name} threw a non-error`);
        }
      }),
      { numRuns: 150 },
    );
  });
}

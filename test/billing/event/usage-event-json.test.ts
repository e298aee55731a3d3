import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { TRACE_KEY, takeTraceparent, type UsageEvent } from '../../../billing/event/usage-event.ts';
import {
  JsonBytes,
  queuedJson,
  queuedTokensJson,
  quote,
  writeQueuedEvent,
} from '../../../billing/event/usage-event-json.ts';
import { buildTokenEvent, buildUsageEvent, type UsageEventInput } from '../../../billing/event-builder.ts';
import { eventInput as input, pricing, text } from '../../support/usage-event-arbitrary.ts';

/** One chat event of subject `s`, with the given fields changed. */
function oneEvent(overrides: Partial<UsageEventInput>): UsageEvent {
  return buildUsageEvent({
    requestId: 'r',
    occurredAtMs: 0,
    provider: 'openai',
    api: 'chat.completions',
    model: 'm',
    stream: false,
    status: 200,
    usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
    usageStage: 'upstream',
    subjectType: 'api_key',
    subjectId: 's',
    source: 'router',
    completionStyle: false,
    price: undefined,
    ...overrides,
  });
}

// First in the file: the writer keeps the last price version's bytes, and its starting state must not
// stand for the empty version (seed 1965309134 found it written without its field).
test('an empty price version is written, even as the first version the process writes', () => {
  const event = oneEvent({ priceVersion: '' });
  assert.equal(event.raw_json.meta.price_version, '');
  assert.equal(queuedJson(event, undefined), JSON.stringify(event));
});

test('every event the builder makes is written byte for byte as JSON.stringify writes it, in any sequence', () => {
  fc.assert(
    fc.property(fc.array(input, { minLength: 1, maxLength: 8 }), (inputs) => {
      for (const i of inputs) {
        const event = buildUsageEvent(i);
        assert.equal(queuedJson(event, undefined), JSON.stringify(event));
        const lead = `${JSON.stringify(TRACE_KEY)}:${JSON.stringify(i.requestId)},`;
        assert.equal(queuedJson(event, i.requestId), `{${lead}${JSON.stringify(event).slice(1)}`);
      }
    }),
    { numRuns: 400 },
  );
});

test('a token event is written from its parts byte for byte as its whole event, between whole events', () => {
  // Inputs without the quantities that make an event whole, half of the time: most are token events.
  const tokenInput = fc.tuple(input, fc.boolean()).map(([i, plain]) =>
    plain
      ? {
          ...i,
          usage: {
            inputTokens: i.usage.inputTokens,
            outputTokens: i.usage.outputTokens,
            totalTokens: i.usage.totalTokens,
          },
        }
      : i,
  );
  let written = 0;
  fc.assert(
    fc.property(fc.array(fc.tuple(tokenInput, fc.boolean()), { minLength: 1, maxLength: 8 }), (inputs) => {
      for (const [i, traced] of inputs) {
        const event = buildUsageEvent(i);
        const traceparent = traced ? i.requestId : undefined;
        const parts = buildTokenEvent(i);
        const whole = queuedJson(event, traceparent);
        if (parts === undefined) continue;
        assert.equal(queuedTokensJson(parts, traceparent), whole);
        written++;
      }
    }),
    { numRuns: 400 },
  );
  assert.ok(written > 400, `${written} token events written`);
});

test('an event that differs from the one before in a single field is written with that field', () => {
  const fields = [
    'requestId',
    'correlationId',
    'occurredAtMs',
    'provider',
    'api',
    'model',
    'stream',
    'status',
    'usage',
    'usageStage',
    'subjectType',
    'subjectId',
    'source',
    'completionStyle',
    'price',
  ] as const satisfies readonly (keyof UsageEventInput)[];
  fc.assert(
    fc.property(input, input, fc.constantFrom(...fields), (before, other, field) => {
      const after: UsageEventInput = { ...before, [field]: other[field] };
      for (const i of [before, after]) {
        const event = buildUsageEvent(i);
        assert.equal(queuedJson(event, undefined), JSON.stringify(event));
      }
    }),
    { numRuns: 1000 },
  );
});

test('events made elsewhere, whose meta differs from their subject, are written as they are', () => {
  const event = oneEvent({ requestId: 'r0' });
  for (const meta of [
    event.raw_json.meta,
    { subject_type: 'team', subject_id: 's', request_id: 'r0' },
    { subject_type: 'team', subject_id: 't', request_id: 'r0' },
    { ...event.raw_json.meta, request_id: 'another "id"' },
  ]) {
    const other: UsageEvent = { ...event, raw_json: { ...event.raw_json, meta } };
    assert.equal(queuedJson(other, undefined), JSON.stringify(other));
  }
});

test('a pricing hint changed after it was written is written anew', () => {
  const event = oneEvent({ requestId: 'r1', price: pricing.lookup('openai', 'gpt-5.4-mini') });
  assert.equal(queuedJson(event, undefined), JSON.stringify(event));
  const hints = structuredClone(event['x-billing']?.pricing_hints) ?? {};
  const copy: UsageEvent = {
    ...event,
    'x-billing': { items: event['x-billing']?.items ?? [], pricing_hints: hints },
  };
  assert.equal(queuedJson(copy, undefined), JSON.stringify(copy));
  for (const h of Object.values(hints)) {
    h.unit_price = 7.25;
    h.currency = 'EUR';
  }
  assert.match(queuedJson(copy, undefined), /"unit_price":7\.25,"pricing_unit":1000000,"currency":"EUR"/);
  assert.equal(queuedJson(copy, undefined), JSON.stringify(copy));
  // Each value on its own: the currency, then the pricing unit.
  for (const h of Object.values(hints)) h.currency = 'GBP';
  assert.equal(queuedJson(copy, undefined), JSON.stringify(copy));
  for (const h of Object.values(hints)) h.pricing_unit = 1000;
  assert.equal(queuedJson(copy, undefined), JSON.stringify(copy));
});

test('quote is JSON.stringify of a string', () => {
  fc.assert(
    fc.property(fc.oneof(fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }), text), (s) => {
      assert.equal(quote(s), JSON.stringify(s));
    }),
    { numRuns: 500 },
  );
});

test('a queued event carries its traceparent first and gives it back', () => {
  const event = oneEvent({
    requestId: 'r2',
    occurredAtMs: 1_000,
    model: 'gpt-5.4-mini',
    stream: true,
    usage: { inputTokens: 3, outputTokens: 4, totalTokens: 7 },
    completionStyle: true,
  });
  const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const line = queuedJson(event, traceparent);
  assert.ok(line.startsWith(`{"${TRACE_KEY}":"${traceparent}","source":`));
  const parsed = JSON.parse(line) as Record<string, unknown>;
  assert.equal(takeTraceparent(parsed), traceparent);
  assert.deepEqual(parsed, event);
  assert.equal(queuedJson(event, undefined), JSON.stringify(event));
});

test('events written one after another into a buffer that has to grow are each their JSON, as UTF-8', () => {
  fc.assert(
    fc.property(fc.array(input, { minLength: 1, maxLength: 8 }), (inputs) => {
      const out = new JsonBytes(8);
      const ends: number[] = [];
      const events = inputs.map((i) => buildUsageEvent(i));
      for (const event of events) {
        writeQueuedEvent(out, event, undefined);
        ends.push(out.at);
      }
      let start = 0;
      events.forEach((event, n) => {
        const end = ends[n] as number;
        assert.deepEqual(out.buf.subarray(start, end), Buffer.from(JSON.stringify(event), 'utf8'));
        start = end;
      });
    }),
    { numRuns: 300 },
  );
});

test('numbers are written as JSON.stringify writes them', () => {
  const out = new JsonBytes(4);
  const values = [
    0,
    -0,
    7,
    10,
    99,
    100,
    1_764_201_600,
    2 ** 31,
    2 ** 53 - 1,
    2 ** 53,
    -3,
    0.5,
    1e21,
    NaN,
    Infinity,
  ];
  for (let p = 10; p <= 10 ** 10; p *= 10) values.push(p - 1, p);
  for (const n of values) {
    out.at = 0;
    out.number(n);
    assert.equal(out.text(), JSON.stringify(n), String(n));
  }
  fc.assert(
    fc.property(fc.oneof(fc.maxSafeNat(), fc.double()), (n) => {
      out.at = 0;
      out.number(n);
      assert.equal(out.text(), JSON.stringify(n));
    }),
  );
});

test('an idempotency key that is not router:<id> is written as it is', () => {
  const event = oneEvent({ requestId: 'r3' });
  for (const key of ['router:r4', 'router:r3 ', 'other', 'router:"r3"']) {
    const other: UsageEvent = { ...event, idempotency_key: key };
    assert.equal(queuedJson(other, undefined), JSON.stringify(other));
  }
  assert.equal(queuedJson(event, undefined), JSON.stringify(event));
});

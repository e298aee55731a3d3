import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import type { TokenEvent } from '../../../billing/event/token-event.ts';
import type { UsageEvent } from '../../../billing/event/usage-event.ts';
import { JsonBytes } from '../../../billing/event/usage-event-json.ts';
import { buildTokenEvent, buildUsageEvent, type UsageEventInput } from '../../../billing/event-builder.ts';
import {
  eventOfCompactLine,
  writeCompactEvent,
  writeCompactLine,
} from '../../../billing/outbox/compact-line.ts';
import { ACTIVE_FILE } from '../../../billing/outbox/layout.ts';
import { type OutboxItem, openOutboxReader } from '../../../billing/outbox/reader.ts';
import { openOutboxWriter } from '../../../billing/outbox/writer.ts';
import { eventInput, pricing } from '../../support/usage-event-arbitrary.ts';

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const TOKEN_KEYS = new Set([
  'input_tokens',
  'output_tokens',
  'total_tokens',
  'prompt_tokens',
  'completion_tokens',
]);

/**
 * Whether the compact line can hold the event: token counts only, each a safe integer, and no
 * interrupted stream's end reason.
 */
function tokenOnly(event: UsageEvent): boolean {
  return (
    event.raw_json.meta.end_reason === undefined &&
    Object.entries(event.raw_json.usage).every(([k, v]) => TOKEN_KEYS.has(k) && Number.isSafeInteger(v))
  );
}

function chat(overrides: Partial<UsageEventInput> = {}): UsageEventInput {
  return {
    requestId: 'f47ac10b-58cc-4372-a567-0e02b2c3d479',
    occurredAtMs: 1_764_262_800_123,
    provider: 'openai',
    api: 'chat.completions',
    model: 'gpt-5.4-mini',
    stream: false,
    status: 200,
    usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17 },
    usageStage: 'upstream',
    subjectType: 'api_key',
    subjectId: 'client-a',
    source: 'router',
    completionStyle: true,
    price: pricing.lookup('openai', 'gpt-5.4-mini'),
    ...overrides,
  };
}

function compact(event: UsageEvent, traceparent?: string): string | undefined {
  const out = new JsonBytes(16);
  out.at = 3;
  const written = writeCompactEvent(out, event, traceparent);
  if (!written) {
    assert.equal(out.at, 3, 'nothing is written when the event is not compact');
    return undefined;
  }
  return out.text(3);
}

function fromParts(event: TokenEvent, traceparent?: string): string | undefined {
  const out = new JsonBytes(16);
  return writeCompactLine(out, event, traceparent) ? out.text() : undefined;
}

test('every token-only event the builder makes comes back from its compact line key for key, in any sequence', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(eventInput, fc.boolean()), { minLength: 1, maxLength: 8 }), (inputs) => {
      for (const [input, traced] of inputs) {
        const event = buildUsageEvent(input);
        const traceparent = traced ? TRACEPARENT : undefined;
        const line = compact(event, traceparent);
        assert.equal(line !== undefined, tokenOnly(event), JSON.stringify(event));
        const parts = buildTokenEvent(input);
        assert.equal(parts !== undefined, line !== undefined, 'the builder makes a token event exactly then');
        if (line === undefined || parts === undefined) continue;
        assert.equal(fromParts(parts, traceparent), line, 'the same line from the parts');
        assert.equal(line.includes('\n'), false);
        const back = eventOfCompactLine(JSON.parse(line));
        assert.ok(back, line);
        assert.equal(JSON.stringify(back.event), JSON.stringify(event));
        assert.deepEqual(back.event, event);
        assert.equal(back.traceparent, traceparent);
      }
    }),
    { numRuns: 500 },
  );
});

test("the common chat event's compact line holds its per-request values after the shape", () => {
  const line = compact(buildUsageEvent(chat({ correlationId: 'client-7' })));
  assert.ok(line);
  assert.match(line, /^\[1,\{"source":"router",.*"aliases":true,"hints":\{"prompt_tokens":\{/);
  assert.ok(line.endsWith('},"f47ac10b-58cc-4372-a567-0e02b2c3d479","client-7",1764262800,12,5,17]'), line);
});

test('events the compact line cannot hold are left to the whole-event writer', () => {
  const cached = buildUsageEvent(
    chat({ usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17, cacheReadTokens: 4 } }),
  );
  assert.equal(compact(cached), undefined, 'cached tokens');
  const first = buildUsageEvent(chat({ requestId: 'a' }));
  buildUsageEvent(chat({ requestId: 'b' }));
  assert.equal(compact(first), undefined, 'its key is not the one just made (an event from elsewhere)');
  const renamed = buildUsageEvent(chat());
  renamed.raw_json.meta.request_id = 'other';
  assert.equal(compact(renamed), undefined, 'meta names another request');
  const fractional = buildUsageEvent(chat());
  fractional.raw_json.usage.total_tokens = 1.5;
  assert.equal(compact(fractional), undefined, 'a count that is not an integer');
  const strayHint = buildUsageEvent(chat({ usage: { inputTokens: 12, outputTokens: 0, totalTokens: 12 } }));
  strayHint['x-billing']!.pricing_hints!.completion_tokens = {
    unit_price: 1,
    pricing_unit: 1,
    currency: 'USD',
  };
  assert.equal(compact(strayHint), undefined, 'a hint for an item that is not there');
  const reordered = buildUsageEvent(chat());
  const { prompt_tokens, completion_tokens } = reordered['x-billing']!.pricing_hints!;
  reordered['x-billing']!.pricing_hints = {
    completion_tokens: completion_tokens!,
    prompt_tokens: prompt_tokens!,
  };
  assert.equal(compact(reordered), undefined, 'hints in another order than the items');
  const unpricedHint = buildUsageEvent(chat());
  unpricedHint['x-billing']!.pricing_hints!.prompt_tokens = {
    unit_price: Number.NaN,
    pricing_unit: 1,
    currency: 'USD',
  };
  assert.equal(compact(unpricedHint), undefined, 'a hint the reader would refuse');
});

test('malformed compact lines are refused', () => {
  const good = JSON.parse(compact(buildUsageEvent(chat()), TRACEPARENT)!) as unknown[];
  assert.ok(eventOfCompactLine(good));
  const changed = (i: number, v: unknown) => good.map((x, j) => (j === i ? v : x));
  const shape = good[1] as Record<string, unknown>;
  const bad: [string, unknown][] = [
    ['another version', changed(0, 2)],
    ['too short', good.slice(0, 7)],
    ['too long', [...good, 'x']],
    ['an object', { ...good }],
    ['a numeric id', changed(2, 7)],
    ['a numeric correlation id', changed(3, 7)],
    ['a fractional time', changed(4, 1.5)],
    ['a negative count', changed(5, -1)],
    ['a count as text', changed(6, '5')],
    ['a huge count', changed(7, 2 ** 60)],
    ['a numeric traceparent', changed(8, 1)],
    ['a shape without a source', changed(1, { ...shape, source: undefined })],
    ['a status as text', changed(1, { ...shape, status: '200' })],
    ['an unknown usage stage', changed(1, { ...shape, usage_stage: 'guessed' })],
    [
      'a hint for another metric',
      changed(1, { ...shape, hints: { images: { unit_price: 1, pricing_unit: 1, currency: 'USD' } } }),
    ],
    [
      'a hint without a currency',
      changed(1, { ...shape, hints: { prompt_tokens: { unit_price: 1, pricing_unit: 1 } } }),
    ],
  ];
  for (const [why, value] of bad) assert.equal(eventOfCompactLine(value), undefined, why);
  // A traceparent of another shape is dropped, the event kept.
  const odd = eventOfCompactLine(changed(8, 'not-a-traceparent'));
  assert.ok(odd);
  assert.equal(odd.traceparent, undefined);
});

test('the outbox holds compact and whole lines side by side, and the reader gives back every event in order', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'compact-line-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const writer = await openOutboxWriter(dir, { fsyncIntervalMs: 0 });
  const inputs = [
    chat({ requestId: 'r1' }),
    chat({
      requestId: 'r2',
      usage: { inputTokens: 9, outputTokens: 2, totalTokens: 11, cacheReadTokens: 3 },
    }),
    chat({ requestId: 'r3', correlationId: 'c3', stream: true }),
    chat({ requestId: 'r4', model: 'no-price', price: undefined, completionStyle: false }),
    chat({ requestId: 'r5', correlationId: 'c5' }),
    chat({ requestId: 'r6', subjectId: 'client-b' }),
  ];
  const expected: UsageEvent[] = [];
  const appends: Promise<void>[] = [];
  for (const [i, input] of inputs.entries()) {
    const event = buildUsageEvent(input);
    expected.push(structuredClone(event));
    const traceparent = i === 2 || i === 4 ? TRACEPARENT : undefined;
    // The last two from their parts, as the gateway's hook writes them.
    const parts = i >= 4 ? buildTokenEvent(input) : undefined;
    appends.push(
      parts === undefined ? writer.append(event, traceparent) : writer.appendTokens(parts, traceparent),
    );
  }
  await Promise.all(appends);
  await writer.close();
  const lines = (await readFile(join(dir, ACTIVE_FILE), 'utf8')).trimEnd().split('\n').slice(1);
  assert.deepEqual(
    lines.map((l) => l[0]),
    ['[', '{', '[', '[', '[', '['],
    'token-only events compact, the cached-token one whole',
  );
  const reader = await openOutboxReader(dir);
  t.after(() => reader.close());
  const items: OutboxItem[] = [];
  for (let item = await reader.next(); item; item = await reader.next()) items.push(item);
  assert.deepEqual(
    items.map((i) => (i.kind === 'event' ? i.event : i.kind)),
    expected,
  );
  assert.deepEqual(
    items.map((i) => (i.kind === 'event' ? i.traceparent : undefined)),
    [undefined, undefined, TRACEPARENT, undefined, TRACEPARENT, undefined],
  );
});

test('the price version and the unpriced mark ride in the shape; a line written before them still reads', () => {
  const version = pricing.version;
  const priced = buildUsageEvent(chat({ priceVersion: version }));
  const line = compact(priced);
  assert.ok(line);
  assert.match(line, new RegExp(`"price_version":"${version}"\\},`));
  assert.deepEqual(eventOfCompactLine(JSON.parse(line))?.event, priced);
  const unpriced = buildUsageEvent(chat({ priceVersion: version, price: undefined }));
  const unpricedLine = compact(unpriced);
  assert.ok(unpricedLine?.includes('"unpriced":true'));
  assert.deepEqual(eventOfCompactLine(JSON.parse(unpricedLine!))?.event, unpriced);
  // An older gateway's line: no price version; the event is rebuilt without one.
  const older = JSON.parse(line) as [number, Record<string, unknown>, ...unknown[]];
  delete older[1].price_version;
  const event = eventOfCompactLine(older)?.event;
  assert.equal(event?.raw_json.meta.price_version, undefined);
  assert.equal(event?.['x-billing']?.price_version, undefined);
  assert.deepEqual(event?.['x-billing']?.items, priced['x-billing']?.items);
});

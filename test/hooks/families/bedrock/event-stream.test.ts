import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import test from 'node:test';
import fc from 'fast-check';
import type { ResponsePart } from '../../../../common/types.ts';
import { bedrockEventStream, EventStreamDecoder } from '../../../../hooks/families/bedrock/event-stream.ts';
import { STREAM_FRAMINGS } from '../../../../hooks/families/index.ts';

const fixture = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../../fixtures/bedrock/${name}`, import.meta.url)));
const json = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../../fixtures/bedrock/${name}`, import.meta.url), 'utf8'));

function decodeAll(bytes: Uint8Array, cuts: readonly number[] = []): ResponsePart[] {
  const decoder = bedrockEventStream.create();
  const parts: ResponsePart[] = [];
  let from = 0;
  for (const cut of [...cuts].sort((a, b) => a - b)) {
    parts.push(...decoder.decode(bytes.subarray(from, cut)));
    from = cut;
  }
  parts.push(...decoder.decode(bytes.subarray(from)));
  parts.push(...decoder.end());
  return parts;
}

const events = (parts: readonly ResponsePart[]) =>
  parts.map((p) => (p.type === 'event' ? { event: p.event, data: JSON.parse(p.data) } : p));

test('the registry picks the framing by the reply content type', () => {
  assert.equal(STREAM_FRAMINGS.get('application/vnd.amazon.eventstream'), bedrockEventStream);
});

test('ConverseStream frames become events named by :event-type with the payload as data', () => {
  const parts = events(decodeAll(fixture('converse-stream.bin')));
  const expected = json('converse-stream.events.json') as { eventType: string; payload: unknown }[];
  assert.deepEqual(
    parts,
    expected.map((m) => ({ event: m.eventType, data: m.payload })),
  );
});

test('InvokeModelWithResponseStream chunks become the Anthropic events they carry, named by type', () => {
  const parts = events(decodeAll(fixture('invoke-stream.bin')));
  const expected = json('invoke-stream.events.json') as { type: string }[];
  assert.deepEqual(
    parts,
    expected.map((e) => ({ event: e.type, data: e })),
  );
  const last = parts.at(-1) as { data: Record<string, unknown> };
  assert.deepEqual(
    (last.data['amazon-bedrock-invocationMetrics'] as { inputTokenCount: number }).inputTokenCount,
    18,
  );
});

test('an exception frame becomes an Anthropic error event naming the exception and its status', () => {
  const parts = events(decodeAll(fixture('converse-stream-exception.bin')));
  assert.equal(parts.length, 3);
  assert.deepEqual(parts[2], {
    event: 'error',
    data: {
      type: 'error',
      error: {
        type: 'api_error',
        message: 'Model stream error: the model produced an invalid sequence.',
        code: 'modelStreamErrorException',
        status: 502,
      },
    },
  });
  const throttled = events(decodeAll(fixture('invoke-stream-throttled.bin')));
  assert.deepEqual((throttled.at(-1) as { data: unknown }).data, {
    type: 'error',
    error: {
      type: 'rate_limit_error',
      message: 'Too many tokens, please wait before trying again.',
      code: 'upstream_rate_limited',
      status: 429,
    },
  });
});

test('any split of the bytes into network chunks yields the same events', () => {
  for (const name of ['converse-stream.bin', 'invoke-stream.bin', 'converse-stream-exception.bin']) {
    const bytes = fixture(name);
    const whole = decodeAll(bytes);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 40 }),
        (cuts) => {
          assert.deepEqual(decodeAll(bytes, cuts), whole);
        },
      ),
      { numRuns: 300 },
    );
    // Byte by byte: every boundary, the 4-byte length prefix split too.
    assert.deepEqual(
      decodeAll(
        bytes,
        Array.from({ length: bytes.length - 1 }, (_, i) => i + 1),
      ),
      whole,
    );
  }
});

test('a stream cut inside a message fails at its end, not silently', () => {
  const bytes = fixture('converse-stream.bin');
  const decoder = bedrockEventStream.create();
  const parts = decoder.decode(bytes.subarray(0, bytes.length - 7));
  assert.equal(parts.length, 9);
  assert.throws(() => decoder.end(), /ended inside a message/);
});

test('a corrupt frame (bad CRC, absurd length) is refused by the codec', () => {
  const bytes = fixture('converse-stream.bin').slice();
  bytes[20] = bytes[20]! ^ 0xff;
  assert.throws(() => new EventStreamDecoder().push(bytes));
  const absurd = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
  assert.throws(() => new EventStreamDecoder().push(absurd), /out of range/);
});

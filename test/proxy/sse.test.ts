// proxy/sse.ts: the event-boundary test on raw bytes, and the reader's limit on one event.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { endsWithBlankLine, type SseEvent, SseReader } from '../../proxy/sse.ts';

const bytes = (s: string) => Buffer.from(s, 'latin1');

test('endsWithBlankLine: a blank line with any line terminators', () => {
  for (const s of [
    'data: x\n\n',
    'data: x\r\n\r\n',
    'data: x\r\r',
    'data: x\r\n\n',
    'data: x\n\r\n',
    'x\r\n\r',
    '\n\n',
    '\r\r',
  ]) {
    assert.ok(endsWithBlankLine(bytes(s)), JSON.stringify(s));
  }
});

test('endsWithBlankLine: a line end that closes no blank line, or none at all', () => {
  for (const s of ['', '\n', '\r', '\r\n', 'data: x', 'data: x\n', 'data: x\r', 'data: x\r\n']) {
    assert.equal(endsWithBlankLine(bytes(s)), false, JSON.stringify(s));
  }
});

test('every chunk ending with a blank line has delivered all its events', () => {
  for (const s of ['data: a\n\n', 'data: a\r\n\r\n', 'data: a\r\r', 'data: a\n\r\n', 'data: a\r\r\n']) {
    const events: SseEvent[] = [];
    const reader = new SseReader((ev) => events.push(ev));
    reader.push(bytes(s));
    assert.ok(endsWithBlankLine(bytes(s)));
    assert.deepEqual(events, [{ data: 'a' }], JSON.stringify(s));
  }
});

test('an event over the size limit fails the push that exceeds it', () => {
  const events: SseEvent[] = [];
  const reader = new SseReader((ev) => events.push(ev), 64);
  reader.push(bytes('data: small\n\n'));
  assert.throws(() => reader.push(bytes(`data: ${'a'.repeat(40)}\ndata: ${'b'.repeat(40)}\n\n`)));
  assert.deepEqual(events, [{ data: 'small' }]);
});

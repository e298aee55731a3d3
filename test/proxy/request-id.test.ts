import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { parseSource } from '../../config/source-address.ts';
import { newRequestId, requestIdPolicy } from '../../proxy/request-id.ts';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('request ids are random version 4 UUIDs, distinct across many pool refills', () => {
  const seen = new Set<string>();
  // Every hex position takes every digit: no half of a byte is fixed, skipped or repeated.
  const digits = Array.from({ length: 36 }, () => new Set<string>());
  for (let i = 0; i < 20_000; i++) {
    const id = newRequestId();
    assert.match(id, UUID_V4);
    seen.add(id);
    for (let c = 0; c < 36; c++) digits[c]!.add(id[c]!);
  }
  assert.equal(seen.size, 20_000);
  for (const [c, set] of digits.entries()) {
    if ([8, 13, 18, 23].includes(c)) assert.deepEqual([...set], ['-']);
    else if (c === 14) assert.deepEqual([...set], ['4']);
    else if (c === 19) assert.deepEqual([...set].sort(), ['8', '9', 'a', 'b']);
    else assert.equal(set.size, 16, `position ${c} takes every hex digit`);
  }
});

test('an id returned earlier is not changed by the ids made after it', () => {
  const first = newRequestId();
  // Its bytes, copied: an id that shared memory with the generator's buffer would change with it.
  const bytes = Buffer.from(first, 'latin1');
  for (let i = 0; i < 300; i++) newRequestId();
  assert.deepEqual(Buffer.from(first, 'latin1'), bytes);
});

function request(headers: Record<string, string>, remoteAddress: string): IncomingMessage {
  return { headers, socket: { remoteAddress } } as unknown as IncomingMessage;
}

test('a caller id becomes the billing id only from a trusted source; otherwise it is the correlation id', () => {
  const policy = requestIdPolicy(['10.0.0.0/8']);
  const given = { 'x-router-request-id': 'ingress-42', 'x-router-correlation-id': 'trace.7' };
  assert.deepEqual(policy(request(given, '10.1.2.3')), { id: 'ingress-42', correlationId: 'trace.7' });
  assert.deepEqual(policy(request(given, '::ffff:10.1.2.3')), {
    id: 'ingress-42',
    correlationId: 'trace.7',
  });
  const outside = policy(request(given, '192.0.2.1'));
  assert.match(outside.id, UUID_V4);
  assert.equal(outside.correlationId, 'ingress-42');
  // A malformed id is neither.
  const bad = policy(request({ 'x-router-request-id': 'a"b' }, '10.1.2.3'));
  assert.match(bad.id, UUID_V4);
  assert.equal(bad.correlationId, undefined);
});

test('trusted sources are addresses or subnets', () => {
  assert.deepEqual(parseSource('10.0.0.0/8'), { address: '10.0.0.0', prefix: 8, family: 'ipv4' });
  assert.deepEqual(parseSource('::1'), { address: '::1', prefix: 128, family: 'ipv6' });
  assert.equal(parseSource('10.0.0.0/33'), undefined);
  assert.equal(parseSource('example.com'), undefined);
});

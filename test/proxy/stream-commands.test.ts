import assert from 'node:assert/strict';
import { test } from 'node:test';
import { streamCommands } from '../../proxy/stream-commands.ts';

/** A RESP array of bulk strings, as redis-server reads a command: its arguments as UTF-8 text. */
function parseCommand(bytes: Buffer): string[] {
  let at = 0;
  const line = (): string => {
    const end = bytes.indexOf('\r\n', at);
    assert.ok(end >= 0, 'a line ends in CRLF');
    const text = bytes.subarray(at, end).toString('latin1');
    at = end + 2;
    return text;
  };
  const head = line();
  assert.match(head, /^\*\d+$/);
  const args: string[] = [];
  for (let i = 0; i < Number(head.slice(1)); i++) {
    const size = line();
    assert.match(size, /^\$\d+$/);
    const length = Number(size.slice(1));
    args.push(bytes.subarray(at, at + length).toString('utf8'));
    at += length;
    assert.equal(bytes.subarray(at, at + 2).toString('latin1'), '\r\n', 'a bulk string ends in CRLF');
    at += 2;
  }
  assert.equal(at, bytes.length, 'nothing after the command');
  return args;
}

const STREAM = 'router:{billing:0}:billing:events';

test('one event: XADD with the payload as its last argument, byte for byte', () => {
  const commands = streamCommands(STREAM);
  const payload = JSON.stringify({ id: 'req_1', model: 'gpt-4o-mini', note: 'prix: 3€, 価格 🚀' });
  assert.deepEqual(parseCommand(commands.xadd(payload)), ['xadd', STREAM, '*', 'payload', payload]);
});

test('a batch: EVAL of the script with the payloads one per line, multi-byte text included', () => {
  const commands = streamCommands(STREAM);
  const payloads = ['{"a":1}', '{"b":"é"}', '{"c":"🚀🚀"}', '{"d":"価格"}', '{}'];
  const args = parseCommand(commands.xaddBatch(payloads.map((payload) => ({ payload }))));
  assert.equal(args.length, 5);
  assert.equal(args[0], 'eval');
  assert.match(args[1]!, /redis\.call\('XADD', KEYS\[1\]/);
  assert.deepEqual(args.slice(2), ['1', STREAM, payloads.join('\n')]);
});

test('a command keeps its bytes while later commands are encoded, in its slab or a new one', () => {
  const commands = streamCommands(STREAM);
  const firstPayload = `{"first":"ü","pad":"${'y'.repeat(200)}"}`;
  const first = commands.xadd(firstPayload);
  const copy = Buffer.from(first);
  const later = commands.xaddBatch([{ payload: '{"later":"€"}' }, { payload: '{"n":2}' }]);
  assert.deepEqual(parseCommand(later).at(-1), '{"later":"€"}\n{"n":2}');
  // Larger than a slab (256 KiB): a buffer of its own, then more commands after it.
  const large = Array.from({ length: 3000 }, (_, i) => ({
    payload: JSON.stringify({ i, pad: 'x'.repeat(400) }),
  }));
  const big = commands.xaddBatch(large);
  const bigCopy = Buffer.from(big);
  for (let i = 0; i < 50; i++) commands.xadd(JSON.stringify({ i, pad: 'z'.repeat(300) }));
  assert.deepEqual(first, copy, 'the first command is unchanged');
  assert.deepEqual(parseCommand(first).at(-1), firstPayload);
  assert.deepEqual(big, bigCopy, 'the large command is unchanged');
  assert.deepEqual(parseCommand(big).at(-1), large.map((e) => e.payload).join('\n'));
});

test('a batch of characters that each take three bytes fits the space set aside for it', () => {
  const commands = streamCommands(STREAM);
  const payloads = Array.from({ length: 50 }, (_, i) => ({ payload: `"${'€'.repeat(i * 37)}"` }));
  assert.deepEqual(
    parseCommand(commands.xaddBatch(payloads)).at(-1),
    payloads.map((e) => e.payload).join('\n'),
  );
});

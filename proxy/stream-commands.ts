// The billing queue's two commands on the wire (RESP), encoded here: each event's payload is written
// once, straight into the bytes the socket takes. Through ioredis's own encoding, every string argument
// was measured twice and written once, and every buffer argument copied once more; the batch script
// (several hundred bytes) went through all of that on every batch.

// Several events in one command: one reply to decode and one command for redis-server to parse, instead
// of one per event. The events travel as one argument, one JSON text per line (JSON text holds no raw
// newline). Sent with EVAL, not EVALSHA: Redis caches the compiled script either way, and EVAL never
// needs the second round trip of a NOSCRIPT miss (after a Redis restart), which would leave the batch off
// the wire when the replies waiting for it end. A script is not a transaction: after an error mid-way the
// events before it stay on the stream although the whole batch is spooled (they are delivered twice and
// billed once).
const XADD_BATCH = `
local lines, from, n = ARGV[1], 1, 0
while true do
  local newline = string.find(lines, '\\n', from, true)
  n = n + 1
  if newline == nil then
    redis.call('XADD', KEYS[1], '*', 'payload', string.sub(lines, from))
    return n
  end
  redis.call('XADD', KEYS[1], '*', 'payload', string.sub(lines, from, newline - 1))
  from = newline + 1
end
`;

export interface StreamCommands {
  /** `XADD <stream> * payload <payload>` */
  xadd(payload: string): Buffer;
  /** `EVAL XADD_BATCH 1 <stream> <the payloads, one per line>` */
  xaddBatch(events: readonly { readonly payload: string }[]): Buffer;
}

const NEWLINE = 0x0a;
const CR = 0x0d;
// Room before the payloads for the last argument's `$<length>\r\n`, written once the length is known.
const LENGTH_ROOM = 24;
// Commands are written into a slab and handed out as views of it, with no copy and no allocation of
// their own. The socket may hold a command past this turn, so no byte of a slab is written twice; a full
// slab is left to the views that still use it.
const SLAB_BYTES = 256 * 1024;
let slab = Buffer.allocUnsafe(0);
let used = 0;

/** `*<count>\r\n` and each argument as a bulk string: the part of a command that never changes. */
function commandHead(count: number, args: readonly string[]): Buffer {
  let text = `*${count}\r\n`;
  for (const arg of args) text += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
  return Buffer.from(text);
}

/** `head` and then `payloads` (newline-separated) as the command's last bulk string. */
function encode(head: Buffer, payloads: readonly { readonly payload: string }[]): Buffer {
  let units = payloads.length;
  for (const p of payloads) units += p.payload.length;
  // A UTF-16 code unit takes at most 3 bytes in UTF-8: no pass to measure the strings first.
  const bound = head.length + LENGTH_ROOM + 3 * units + 2;
  if (used + bound > slab.length) {
    slab = Buffer.allocUnsafe(Math.max(SLAB_BYTES, bound));
    used = 0;
  }
  const body = used + head.length + LENGTH_ROOM;
  let end = body;
  for (let i = 0; i < payloads.length; i++) {
    if (i > 0) slab[end++] = NEWLINE;
    end += slab.write(payloads[i]!.payload, end);
  }
  const length = `$${end - body}\r\n`;
  const start = body - length.length - head.length;
  slab.set(head, start);
  slab.write(length, body - length.length, 'latin1');
  slab[end] = CR;
  slab[end + 1] = NEWLINE;
  used = end + 2;
  return slab.subarray(start, used);
}

export function streamCommands(stream: string): StreamCommands {
  const xaddHead = commandHead(5, ['xadd', stream, '*', 'payload']);
  const batchHead = commandHead(5, ['eval', XADD_BATCH, '1', stream]);
  return {
    xadd: (payload) => encode(xaddHead, [{ payload }]),
    xaddBatch: (events) => encode(batchHead, events),
  };
}

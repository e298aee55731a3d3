// The billing queue's two commands on the wire (RESP), encoded here: each event's payload is written
// once, straight into the bytes the socket takes. Through ioredis's own encoding, every string argument
// was measured twice and written once, and every buffer argument copied once more; the batch script
// (several hundred bytes) went through all of that on every batch.

// Several events in one command: one reply to decode and one command for redis-server to parse, instead
// of one per event. The events travel as one argument, one JSON text per line (JSON.stringify writes no
// raw newline). Sent with EVAL, not EVALSHA: Redis caches the compiled script either way, and EVAL never
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
// A batch's scratch is kept for the next one up to this size; a larger one is made for its batch alone.
const MAX_SCRATCH_BYTES = 1 << 20;

/** `*<count>\r\n` and each argument as a bulk string: the part of a command that never changes. */
function commandHead(count: number, args: readonly string[]): Buffer {
  let text = `*${count}\r\n`;
  for (const arg of args) text += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
  return Buffer.from(text);
}

export function streamCommands(stream: string): StreamCommands {
  const xaddHead = commandHead(5, ['xadd', stream, '*', 'payload']);
  const batchHead = commandHead(5, ['eval', XADD_BATCH, '1', stream]);
  let scratch = Buffer.allocUnsafe(0);

  /** `head` and then `payloads` (newline-separated) as the command's last bulk string. */
  function encode(head: Buffer, payloads: readonly { readonly payload: string }[]): Buffer {
    let units = payloads.length;
    for (const p of payloads) units += p.payload.length;
    // A UTF-16 code unit takes at most 3 bytes in UTF-8: no pass to measure the strings first.
    const bound = LENGTH_ROOM + 3 * units;
    let buf = scratch;
    if (bound > buf.length) {
      buf = Buffer.allocUnsafe(Math.max(bound, 2 * scratch.length));
      if (buf.length <= MAX_SCRATCH_BYTES) scratch = buf;
    }
    let end = LENGTH_ROOM;
    for (let i = 0; i < payloads.length; i++) {
      if (i > 0) buf[end++] = NEWLINE;
      end += buf.write(payloads[i]!.payload, end);
    }
    const length = `$${end - LENGTH_ROOM}\r\n`;
    const start = LENGTH_ROOM - length.length;
    buf.write(length, start, 'latin1');
    // The socket may hold the bytes past this turn: they leave the scratch in a buffer of their own.
    const out = Buffer.allocUnsafe(head.length + (end - start) + 2);
    head.copy(out, 0);
    buf.copy(out, head.length, start, end);
    out[out.length - 2] = CR;
    out[out.length - 1] = NEWLINE;
    return out;
  }

  return {
    xadd: (payload) => encode(xaddHead, [{ payload }]),
    xaddBatch: (events) => encode(batchHead, events),
  };
}

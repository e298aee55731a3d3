// AWS event-stream frames (application/vnd.amazon.eventstream) as Bedrock streams them: prelude, headers,
// payload and CRCs, encoded by @smithy/eventstream-codec.

import { EventStreamCodec, type MessageHeaders } from '@smithy/eventstream-codec';

const codec = new EventStreamCodec(
  (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'),
  (text) => Buffer.from(text, 'utf8'),
);

export const EVENTSTREAM = 'application/vnd.amazon.eventstream';

function frame(headers: MessageHeaders, payload: unknown): Buffer {
  const bytes = codec.encode({ headers, body: Buffer.from(JSON.stringify(payload), 'utf8') });
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** An `event` message: `:event-type` names the union member, the payload is its JSON. */
export function eventFrame(eventType: string, payload: unknown): Buffer {
  return frame(
    {
      ':event-type': { type: 'string', value: eventType },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'event' },
    },
    payload,
  );
}

/** An `exception` message, e.g. `modelStreamErrorException`, that ends the stream for the SDK. */
export function exceptionFrame(exceptionType: string, payload: unknown): Buffer {
  return frame(
    {
      ':exception-type': { type: 'string', value: exceptionType },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'exception' },
    },
    payload,
  );
}

/** Decodes a whole event-stream body (tests); each message's total length leads its prelude. */
export function decodeFrames(body: Uint8Array): { headers: Record<string, unknown>; json: unknown }[] {
  const buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const out: { headers: Record<string, unknown>; json: unknown }[] = [];
  for (let at = 0; at + 4 <= buf.length; ) {
    const length = buf.readUInt32BE(at);
    const message = codec.decode(buf.subarray(at, at + length));
    at += length;
    const headers: Record<string, unknown> = {};
    for (const [name, h] of Object.entries(message.headers)) headers[name] = h.value;
    out.push({ headers, json: JSON.parse(Buffer.from(message.body).toString('utf8')) });
  }
  return out;
}

// AWS event streams (`application/vnd.amazon.eventstream`), as Bedrock's ConverseStream and
// InvokeModelWithResponseStream answer: binary messages, each with headers (`:message-type`,
// `:event-type` or `:exception-type`, `:content-type`) and a JSON payload. @smithy/eventstream-codec
// decodes and checks each message (prelude and message CRCs, headers); its own splitter is an async
// iterator, and the relay decodes per chunk synchronously, so the message boundaries are found here
// from the prelude's total length, as that splitter does.

import { EventStreamCodec, type MessageHeaders } from '@smithy/eventstream-codec';
import { fromUtf8, toUtf8 } from '@smithy/util-utf8';
import type { ResponsePart } from '../../../common/types.ts';
import type { StreamFraming, StreamFramingDecoder } from '../types.ts';
import { bedrockExceptionEvent } from './errors.ts';

export const EVENT_STREAM_CONTENT_TYPE = 'application/vnd.amazon.eventstream';

/** One decoded message. */
export interface EventStreamMessage {
  /** `event`, `exception` or `error`. */
  readonly messageType: string;
  /** `:event-type` of an event (`chunk`, `contentBlockDelta`, ...). */
  readonly eventType: string | undefined;
  /** `:exception-type` of an exception (`modelStreamErrorException`, ...), `:error-code` of an error. */
  readonly exceptionType: string | undefined;
  /** The payload as text (JSON for Bedrock). */
  readonly payload: string;
}

/** The prelude: total length (4 bytes), headers length (4), prelude CRC (4); the message CRC ends it. */
const MIN_MESSAGE_BYTES = 16;
/** AWS caps an event stream message at 16 MiB; more means a corrupt or foreign stream. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024 + 1024;

const codec = new EventStreamCodec(toUtf8, fromUtf8);
const text = new TextDecoder('utf-8', { fatal: false });

function header(headers: MessageHeaders, name: string): string | undefined {
  const value = headers[name];
  return value?.type === 'string' ? value.value : undefined;
}

/** Bytes in, whole messages out, whatever the chunk boundaries. */
export class EventStreamDecoder {
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;

  push(chunk: Uint8Array): EventStreamMessage[] {
    if (chunk.length > 0) {
      this.#pending.push(chunk);
      this.#pendingBytes += chunk.length;
    }
    const out: EventStreamMessage[] = [];
    for (;;) {
      const total = this.#nextLength();
      if (total === undefined || this.#pendingBytes < total) return out;
      out.push(toMessage(this.#take(total)));
    }
  }

  /** Throws when the stream ended inside a message. */
  end(): void {
    if (this.#pendingBytes > 0) throw new Error('event stream ended inside a message');
  }

  #nextLength(): number | undefined {
    if (this.#pendingBytes < 4) return undefined;
    const head = this.#pending[0]!.length >= 4 ? this.#pending[0]! : this.#concat();
    const total = new DataView(head.buffer, head.byteOffset, 4).getUint32(0, false);
    if (total < MIN_MESSAGE_BYTES || total > MAX_MESSAGE_BYTES)
      throw new Error(`event stream message length ${total} is out of range`);
    return total;
  }

  #concat(): Uint8Array {
    const whole = new Uint8Array(this.#pendingBytes);
    let at = 0;
    for (const part of this.#pending) {
      whole.set(part, at);
      at += part.length;
    }
    this.#pending = [whole];
    return whole;
  }

  #take(length: number): Uint8Array {
    const first = this.#pending[0]!;
    const whole = first.length >= length ? first : this.#concat();
    const message = whole.subarray(0, length);
    const rest = whole.subarray(length);
    if (rest.length > 0) this.#pending[0] = rest;
    else this.#pending.shift();
    this.#pendingBytes -= length;
    return message;
  }
}

function toMessage(bytes: Uint8Array): EventStreamMessage {
  const { headers, body } = codec.decode(bytes);
  const messageType = header(headers, ':message-type') ?? 'event';
  return {
    messageType,
    eventType: header(headers, ':event-type'),
    exceptionType: header(headers, ':exception-type') ?? header(headers, ':error-code'),
    payload: text.decode(body),
  };
}

/**
 * The event Bedrock's `chunk` payload carries (`{"bytes": "<base64>"}`): one Anthropic stream event as
 * InvokeModelWithResponseStream sends it, named by its `type`. Undefined when the payload is not that.
 */
function chunkEvent(payload: string): ResponsePart | undefined {
  let bytes: unknown;
  try {
    bytes = (JSON.parse(payload) as { bytes?: unknown }).bytes;
  } catch {
    return undefined;
  }
  if (typeof bytes !== 'string') return undefined;
  const data = Buffer.from(bytes, 'base64').toString('utf8');
  const type = /^\s*\{\s*"type"\s*:\s*"([a-z_]+)"/.exec(data)?.[1] ?? typeOf(data);
  return type === undefined ? { type: 'event', data } : { type: 'event', event: type, data };
}

function typeOf(data: string): string | undefined {
  try {
    const type = (JSON.parse(data) as { type?: unknown }).type;
    return typeof type === 'string' ? type : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Messages as the rule's hooks see SSE events:
 * - a `chunk` event (InvokeModelWithResponseStream): the Anthropic event it carries, named by its type
 *   (the last, `message_stop`, carries `amazon-bedrock-invocationMetrics`);
 * - any other event (ConverseStream's `messageStart` ... `metadata`): named by `:event-type`, the
 *   payload as data;
 * - an exception or error: an `error` event in the Anthropic error shape, which Anthropic clients read
 *   as it is and every translator of Bedrock replies turns into its client's error event
 *   (hooks/families/bedrock/errors.ts).
 */
export function messageToPart(message: EventStreamMessage): ResponsePart | undefined {
  if (message.messageType !== 'event') {
    return bedrockExceptionEvent(message.exceptionType ?? message.messageType, message.payload);
  }
  if (message.eventType === 'chunk') return chunkEvent(message.payload);
  if (message.eventType === undefined) return undefined;
  return { type: 'event', event: message.eventType, data: message.payload };
}

class EventStreamFramingDecoder implements StreamFramingDecoder {
  readonly #decoder = new EventStreamDecoder();

  decode(chunk: Uint8Array): ResponsePart[] {
    const parts: ResponsePart[] = [];
    for (const message of this.#decoder.push(chunk)) {
      const part = messageToPart(message);
      if (part !== undefined) parts.push(part);
    }
    return parts;
  }

  end(): ResponsePart[] {
    this.#decoder.end();
    return [];
  }
}

/** The framing of Bedrock's streams (both APIs), for the relay to pick by the reply's content type. */
export const bedrockEventStream: StreamFraming = {
  name: 'bedrock_event_stream',
  contentType: EVENT_STREAM_CONTENT_TYPE,
  create: () => new EventStreamFramingDecoder(),
};

/** Encodes messages as Bedrock sends them (fixtures, the upstream simulator). */
export function encodeEventStreamMessage(
  message: { eventType: string; payload: string } | { exceptionType: string; payload: string },
): Uint8Array {
  const headers: MessageHeaders =
    'eventType' in message
      ? {
          ':event-type': { type: 'string', value: message.eventType },
          ':content-type': { type: 'string', value: 'application/json' },
          ':message-type': { type: 'string', value: 'event' },
        }
      : {
          ':exception-type': { type: 'string', value: message.exceptionType },
          ':content-type': { type: 'string', value: 'application/json' },
          ':message-type': { type: 'string', value: 'exception' },
        };
  return codec.encode({ headers, body: fromUtf8(message.payload) });
}

// Server-sent events in and out. Parsing is eventsource-parser's (spec-conformant line handling, events
// split across network chunks); UTF-8 split across chunks is handled by a streaming TextDecoder.

import { createParser, type EventSourceParser } from 'eventsource-parser';

const LF = 0x0a;
const CR = 0x0d;

export interface SseEvent {
  readonly event?: string | undefined;
  readonly data: string;
}

/** Serialize one event; multi-line data becomes several `data:` lines as the SSE format requires. */
export function serializeEvent(ev: SseEvent): string {
  const head = ev.event !== undefined && ev.event !== '' ? `event: ${ev.event}\n` : '';
  if (!ev.data.includes('\n')) return `${head}data: ${ev.data}\n\n`;
  return `${head}data: ${ev.data.split('\n').join('\ndata: ')}\n\n`;
}

/**
 * Whether raw stream bytes end with a blank line (`\n\n`, `\r\n\r\n`, `\r\r`, or terminators mixed), so
 * that after them a reader holds no partial line or event. The last terminator must follow another one
 * that is not its own `\r` (a `\r\n` is one terminator).
 */
export function endsWithBlankLine(bytes: Uint8Array): boolean {
  const n = bytes.length;
  const last = bytes[n - 1];
  if (last === CR) return isLineEnd(bytes[n - 2]);
  if (last !== LF) return false;
  const prev = bytes[n - 2];
  return prev === LF || (prev === CR && isLineEnd(bytes[n - 3]));
}

function isLineEnd(byte: number | undefined): boolean {
  return byte === LF || byte === CR;
}

/** Incremental reader: feed raw bytes, receive whole events. Constant memory beyond one partial event. */
export class SseReader {
  readonly #decoder = new TextDecoder('utf-8');
  readonly #parser: EventSourceParser;

  constructor(onEvent: (ev: SseEvent) => void, maxEventBytes = 8 * 1024 * 1024) {
    this.#parser = createParser({
      onEvent: (msg) =>
        onEvent(msg.event === undefined ? { data: msg.data } : { event: msg.event, data: msg.data }),
      maxBufferSize: maxEventBytes,
      // An event over the limit fails the stream at once (the parser would drop it silently and throw on
      // the next feed), so no chunk holding part of it is counted as passed on unchanged.
      onError: (err) => {
        if (err.type === 'max-buffer-size-exceeded') throw err;
      },
    });
  }

  push(chunk: Uint8Array): void {
    this.#parser.feed(this.#decoder.decode(chunk, { stream: true }));
  }

  /** Flush a final event that was not followed by a blank line. */
  end(): void {
    const rest = this.#decoder.decode();
    if (rest.length > 0) this.#parser.feed(rest);
    this.#parser.feed('\n\n');
  }
}

// Server-sent events in and out. Parsing is eventsource-parser's (spec-conformant line handling, events
// split across network chunks); UTF-8 split across chunks is handled by a streaming TextDecoder.

import { createParser, type EventSourceParser } from 'eventsource-parser';

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

/** Incremental reader: feed raw bytes, receive whole events. Constant memory beyond one partial event. */
export class SseReader {
  readonly #decoder = new TextDecoder('utf-8');
  readonly #parser: EventSourceParser;

  constructor(onEvent: (ev: SseEvent) => void, maxEventBytes = 8 * 1024 * 1024) {
    this.#parser = createParser({
      onEvent: (msg) =>
        onEvent(msg.event === undefined ? { data: msg.data } : { event: msg.event, data: msg.data }),
      maxBufferSize: maxEventBytes,
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

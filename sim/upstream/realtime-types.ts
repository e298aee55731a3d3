// Shapes shared by the realtime endpoints (realtime.ts) and their protocols (realtime-openai.ts,
// realtime-gemini.ts): the session recording and what a protocol sees of its connection.

import type { IncomingHttpHeaders } from 'node:http';
import type { FailMode, Knobs } from './types.ts';

export type RealtimeProvider = 'openai' | 'gemini';

export interface RealtimeClose {
  code: number;
  reason: string;
  /** Who started the close: the client, or the simulator (a failure knob, a fatal protocol error, close()). */
  by: 'client' | 'server';
}

/** One realtime handshake and, when it was accepted, its whole conversation. */
export interface RecordedRealtimeSession {
  provider: RealtimeProvider;
  /** Path with query, as requested. */
  path: string;
  headers: IncomingHttpHeaders;
  /** 101 when the upgrade was accepted, else the HTTP status it was refused with (401, injected 4xx/5xx). */
  status: number;
  /** The negotiated WebSocket subprotocol ('' when none). */
  protocol: string;
  /** OpenAI: the session id (sess_…); Gemini: a simulator id (live_…). '' when refused. */
  id: string;
  /** OpenAI: ?model= (or the Azure deployment); Gemini: setup.model without "models/" ('' until setup). */
  model: string;
  /** Client messages in order, parsed JSON (a frame that is not JSON is kept as its text). */
  received: unknown[];
  /** Server messages in order, as sent (parsed JSON). */
  sent: unknown[];
  /** Frame counts (the lists above keep at most 10,000 entries each; these keep counting). */
  counts: { received: number; sent: number; responses: number };
  /** Set when the socket has closed. */
  closed: RealtimeClose | undefined;
}

export interface RealtimeRecording {
  /** The most recent realtime handshakes (accepted or refused), oldest first, bounded like `requests`. */
  readonly sessions: RecordedRealtimeSession[];
  /** Sockets open right now. */
  readonly open: number;
  /** Closes every open session from the server side, with a close frame (an upstream that hangs up). */
  hangUp(code: number, reason: string): void;
}

/** How many frames a recording keeps per direction. */
export const MAX_FRAMES = 10_000;

/** What a protocol session sees of its connection. */
export interface RealtimeConn {
  readonly record: RecordedRealtimeSession;
  /** Knobs of the connection; Gemini completes them with the model name at setup. */
  knobs: Knobs;
  readonly query: URLSearchParams;
  readonly closed: boolean;
  /** Sends one JSON message (text frame, or a binary frame when `binary` is set) and records it. */
  send(message: object): void;
  binary: boolean;
  /** Closes with a close frame (server-initiated). */
  close(code: number, reason: string): void;
  /** Drops the TCP connection without a close frame (the client sees 1006). */
  terminate(): void;
  /** A timer that is cleared when the socket closes. */
  later(fn: () => void, ms: number): void;
  /** Counts one finished response / turn. */
  responseDone(): void;
  /** Re-evaluates the injected failure once the model is known (Gemini setup); counts it like HTTP ones. */
  failure(knobs: Knobs): FailMode | undefined;
  /** Knobs for a model name, with the connection's headers and query knobs. */
  knobsFor(model: string): Knobs;
  /** The upgrade request's headers with the x-sim-* query parameters merged in (the query wins). */
  readonly knobHeaders: IncomingHttpHeaders;
}

/**
 * The injected failure as decided at the handshake. OpenAI knows its model from the URL, so `decided`
 * is always true; Gemini decides at the handshake only when a header or query parameter asked for a
 * failure, else at setup, with the model name.
 */
export interface HandshakeFailure {
  decided: boolean;
  mode: FailMode | undefined;
}

/** Sends a turn's steps one by one, `delayMs` apart (all in one go when 0); stoppable, and cut for failures. */
export class PacedTurn {
  private next = 0;
  private stopped = false;

  private readonly conn: RealtimeConn;
  private readonly steps: Array<() => void>;
  private readonly delayMs: number;
  /** Stop after this many steps and call onCut (x-sim-fail: midstream…). */
  private readonly cutAfter: number | undefined;
  private readonly onCut: () => void;

  constructor(
    conn: RealtimeConn,
    steps: Array<() => void>,
    delayMs: number,
    cutAfter: number | undefined,
    onCut: () => void,
  ) {
    this.conn = conn;
    this.steps = steps;
    this.delayMs = delayMs;
    this.cutAfter = cutAfter;
    this.onCut = onCut;
  }

  get running(): boolean {
    return !this.stopped && this.next < this.steps.length;
  }

  start(): void {
    this.step();
  }

  stop(): void {
    this.stopped = true;
  }

  private readonly step = (): void => {
    while (!this.stopped && !this.conn.closed && this.next < this.steps.length) {
      if (this.cutAfter !== undefined && this.next >= this.cutAfter) {
        this.stopped = true;
        this.onCut();
        return;
      }
      this.steps[this.next++]!();
      if (this.delayMs > 0 && this.next < this.steps.length) {
        this.conn.later(this.step, this.delayMs);
        return;
      }
    }
  };
}

/** One flag knob that the shared Knobs do not carry: header, query parameter (x-sim-NAME) or model token. */
export function flagKnob(headers: IncomingHttpHeaders, name: string, model: string): boolean {
  const v = headers[`x-sim-${name}`];
  const value = Array.isArray(v) ? v[0] : v;
  if (value !== undefined) return value === '1' || value === 'true' || value === 'yes';
  return new RegExp(`(?:^|[-_+/])${name}(?=$|[-_+])`).test(model.toLowerCase());
}

/** A protocol's per-connection state machine. */
export interface RealtimeProtocolSession {
  open(): void;
  /** `value` is the parsed JSON, or undefined when the frame was not JSON. */
  message(value: unknown, text: string, isBinary: boolean): void;
  /** The socket is gone: stop timers and streams. */
  closed(): void;
}

const FAIL_MESSAGES: Record<number, string> = {
  401: 'Simulated authentication failure (x-sim-fail: 401).',
  429: 'Simulated rate limit (x-sim-fail: 429). Please retry after a short wait.',
  500: 'Simulated internal error (x-sim-fail: 500).',
  503: 'Simulated overload (x-sim-fail: 503). The service is temporarily unavailable.',
};

export function failMessage(status: number): string {
  return FAIL_MESSAGES[status] ?? `Simulated error ${status}.`;
}

/** Deterministic "speech": a quiet 16-bit sawtooth (not silence, so a pipeline that drops zeros is caught). */
export function speech(bytes: number): Buffer {
  const out = Buffer.alloc(bytes);
  for (let i = 0; i + 1 < bytes; i += 2) out.writeInt16LE(((i >> 1) % 64) * 16 - 512, i);
  return out;
}

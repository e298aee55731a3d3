// Shared shapes of the upstream simulator: what a route handler sees and what it answers.

import type { IncomingHttpHeaders } from 'node:http';

/** How a request asks the simulator to misbehave (x-sim-fail). */
export type FailMode =
  | 'reset'
  | 'midstream'
  | 'midstream-429'
  | 'midstream-reset'
  | 'midstream-end'
  | 'hang'
  | number;

/** Per-request control knobs, read from x-sim-* headers, then from the model name. */
export interface Knobs {
  /** Number of content deltas in a streamed reply. */
  chunks: number;
  /** Pause between SSE events; 0 writes the whole stream at once. */
  chunkDelayMs: number;
  /** Pause before the response headers. */
  latencyMs: number;
  fail: FailMode | undefined;
  /** Fail only the first N requests sharing failKey; undefined = always. */
  failTimes: number | undefined;
  failKey: string;
  noUsage: boolean;
  unicode: boolean;
  /** Force a tool call when tools are offered. */
  tool: boolean;
  /** Filler words appended to the echo (reply length). */
  words: number;
  cachedTokens: number;
  /** Input tokens reported as written to the prompt cache (Anthropic, Bedrock). */
  cacheWriteTokens: number;
  reasoningTokens: number;
  /** "<provider>/<name>" of a fixture to replay instead of generating a reply. */
  replay: string | undefined;
  /** A stream sends this many frames, then waits for UpstreamSim.release(). */
  holdAfter: number | undefined;
  /** Counting endpoints never answer (the generation endpoints answer as usual). */
  countHang: boolean;
}

/** The parsed request a route handler works from. */
export interface SimRequest {
  readonly method: string;
  readonly pathname: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** Parsed JSON body when it is a JSON object. */
  readonly json: Record<string, unknown> | undefined;
  readonly knobs: Knobs;
  /** Route parameters, e.g. the Gemini model taken from the path. */
  readonly params: Record<string, string>;
}

export interface JsonReply {
  readonly kind: 'json';
  readonly status: number;
  /** Pre-serialised body; handlers serialise once. */
  readonly body: string;
  readonly headers?: Record<string, string>;
}

export interface BytesReply {
  readonly kind: 'bytes';
  readonly status: number;
  readonly contentType: string;
  readonly body: Buffer | string;
  readonly headers?: Record<string, string>;
}

export interface StreamReply {
  readonly kind: 'stream';
  readonly contentType: string;
  /** Complete wire frames ("data: ...\n\n", or binary event-stream messages), written in order, paced by chunkDelayMs. */
  readonly frames: string[] | Buffer[];
  /** The provider's in-stream error frame, used by x-sim-fail: midstream ('' = none). */
  readonly errorFrame: string | Buffer;
  /** The provider's in-stream throttling error, used by x-sim-fail: midstream-429 (absent: errorFrame). */
  readonly throttleFrame?: string | Buffer;
  readonly headers?: Record<string, string>;
}

export type SimReply = JsonReply | BytesReply | StreamReply;

/** Error and auth conventions of one provider's wire format. */
export interface Dialect {
  readonly name: 'openai' | 'anthropic' | 'gemini' | 'bedrock' | 'vertex' | 'azure';
  /** `headers` are the request's, for knobs that shape the error (Bedrock's x-sim-error-type). */
  errorReply(status: number, message: string, headers?: IncomingHttpHeaders): JsonReply;
  /** True when the request carries credentials in this provider's style. */
  hasAuth(headers: IncomingHttpHeaders, query: URLSearchParams): boolean;
}

export type RouteHandler = (req: SimRequest) => SimReply | Promise<SimReply>;

export interface RecordedRequest {
  method: string;
  /** Path with query string. */
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Parsed body when it was JSON. */
  json: unknown;
}

export interface SimStats {
  /** Responses the client abandoned before they were complete (includes hung requests). */
  aborted: number;
  /** Responses written to the end (any status). */
  served: number;
  /** Failures injected through x-sim-fail (or a fail-… model name). */
  injected: number;
  /** Streams that reached their x-sim-hold-after point. */
  held: number;
}

/** How many of a stream's frames a `midstream` failure sends before its error frame (at least one). */
export function framesBeforeCut(total: number): number {
  return Math.max(1, total >> 1);
}

// The hook interface: the one contract every built-in behaviour (auth, balance, target selection, the
// DSL's rewrite, SSE transforms, usage sniffing, billing enqueue) and every custom hook module implements.
// Stage order and run rules live in proxy/pipeline.ts; docs/hooks.md and docs/lifecycle.md explain them.

import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { RateLimits } from './rate-limit-types.ts';

/** The api identifiers that match rules test (docs/dsl.md). */
export const API_NAMES = [
  'completions',
  'chat.completions',
  'responses',
  'native.messages',
  'embeddings',
  'images.generations',
  'images.edits',
  'audio.speech',
  'audio.transcriptions',
  'audio.translations',
  'native.generateContent',
  'native.streamGenerateContent',
  // Realtime sessions over WebSocket (docs/realtime.md): OpenAI Realtime and Gemini Live.
  'realtime',
  'native.live',
  // Token counting: not model calls, never billed (docs/translation.md "Counting tokens").
  'messages.count_tokens',
  'native.countTokens',
  'responses.input_tokens',
] as const;
export type ApiName = (typeof API_NAMES)[number];

/** The apis that generate text (an output cap, or its default, bounds what a request may produce). */
export const GENERATION_APIS: ReadonlySet<ApiName> = new Set<ApiName>([
  'completions',
  'chat.completions',
  'responses',
  'native.messages',
  'native.generateContent',
  'native.streamGenerateContent',
]);

/** The realtime sessions among them: WebSocket upgrades whose frames a rule relays or translates. */
export const REALTIME_APIS: ReadonlySet<ApiName> = new Set<ApiName>(['realtime', 'native.live']);

/**
 * The wire family a client speaks, by its registered name (hooks/families/index.ts); decides the shape
 * of errors and of translated replies.
 */
export type WireFormat = string;

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** Normalized token counts (docs/billing.md "The usage event"). Optional fields are present only when the upstream reported them. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  cacheReadTokens?: number;
  cacheCreationTokens?: number;
  /** Audio tokens among the input and output tokens (realtime sessions), not cached ones. */
  inputAudioTokens?: number;
  outputAudioTokens?: number;
  reasoningTokens?: number;
  /** Images generated, and the size and quality they are priced by (reported by the reply, else asked for). */
  images?: number;
  imageSize?: string;
  imageQuality?: string;
  /** Characters of text turned into speech (Unicode code points of the request's `input`). */
  inputCharacters?: number;
  /** Seconds of audio transcribed or translated. */
  audioSeconds?: number;
}

export type UsageStage = 'upstream' | 'estimated';

/**
 * Why a stream ended before it was read to its end with the provider's final usage (docs/billing.md
 * "Interrupted streams"): the client left; the upstream failed mid-stream (an error event in the stream,
 * a connection reset, the body timeout); the upstream ended the stream without an error and without its
 * final usage; or the bound of `billing.interrupted_stream: finish_upstream` ended the reading.
 */
export type StreamEndReason = 'client_gone' | 'upstream_error' | 'upstream_cut' | 'timeout';

/** Who is calling: the result of authentication. */
export interface Principal {
  /** Access key name; undefined for the master key. */
  readonly keyName: string | undefined;
  readonly isMaster: boolean;
  /** Billing subject; subjectId is '' when the request maps to no subject. */
  readonly subjectType: string;
  readonly subjectId: string;
  /** The key's own rate limits, as its record or entry sets them (the defaults are applied later). */
  readonly limits?: RateLimits | undefined;
  /** The key's own model list (glob patterns of client model ids). */
  readonly models?: readonly string[] | undefined;
}

/** One candidate upstream chosen by selectTarget. The pipeline tries candidates in order (retry rules). */
export interface TargetCandidate {
  readonly provider: string;
  /** Model name sent upstream (registry mapping); the requested model when there is no mapping. */
  readonly upstreamModel: string | undefined;
}

export interface TargetChoice {
  readonly candidates: readonly TargetCandidate[];
  /** 'header' when x-router-provider chose the provider, 'registry' otherwise. */
  readonly via: 'header' | 'registry' | 'hook';
}

/** The request as it will be sent upstream; rewriteBody hooks reduce over it. */
export interface UpstreamRequest {
  method: string;
  /** Absolute origin, e.g. "https://api.openai.com" (no trailing slash). */
  origin: string;
  /** Path including any base path prefix, without the query string. */
  path: string;
  query: URLSearchParams;
  /** Lower-case header names. */
  headers: Record<string, string>;
  /** JSON body (object) or raw bytes (multipart, binary, or a body no hook parsed). */
  body: JsonObject | Buffer | undefined;
}

/**
 * One unit of the upstream reply as it flows through onResponseChunk.
 * - `event`: one server-sent event of a stream (data without the `data: ` prefix).
 * - `json`: the whole JSON body of a non-streaming reply.
 */
export type ResponsePart =
  | { readonly type: 'event'; readonly event?: string | undefined; readonly data: string }
  | { readonly type: 'json'; readonly value: JsonValue };

/** Status and headers of the upstream reply, as the client will see them (hooks may replace them). */
export interface ResponseHead {
  status: number;
  /** Lower-case header names. */
  headers: Record<string, string>;
}

/** An early answer from onRequest (like an Envoy filter's StopIteration with a local reply). */
export interface RespondResult {
  readonly kind: 'respond';
  readonly status: number;
  readonly body: JsonValue;
  readonly headers?: Readonly<Record<string, string>>;
}
export interface ContinueResult {
  readonly kind: 'continue';
}
export type OnRequestResult = ContinueResult | RespondResult;
export const CONTINUE: ContinueResult = Object.freeze({ kind: 'continue' });

/**
 * Per-request state. Small and flat on purpose: one object per request, built by the server, passed
 * to every stage. Hooks keep their own per-request state in a WeakMap keyed by the context.
 */
export interface RequestContext {
  /** The gateway's id of this request, which billing uses (docs/billing.md "Request ids"). */
  readonly id: string;
  /** The caller's own X-Router-Request-Id when it is not the billing id; logged and in the event's meta. */
  readonly correlationId: string | undefined;
  readonly api: ApiName;
  /** The wire format the client speaks (decides error and reply shapes). */
  readonly clientFormat: WireFormat;
  readonly method: string;
  /** Path as received, without the query string. */
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  /** Wall clock at arrival (ms since epoch). */
  readonly receivedAt: number;
  /** Monotonic clock at arrival (performance.now()). */
  readonly startedAt: number;
  /** Aborted when the client goes away before the reply is finished; a completed request never aborts it. */
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** Parsed JSON body, when the endpoint takes JSON. */
  body: JsonObject | undefined;
  /** Raw request bytes (always present; empty for GET). */
  rawBody: Buffer;
  /** Requested model (JSON `model`, the Gemini path segment, or the multipart `model` field). */
  model: string | undefined;
  stream: boolean;
  principal: Principal | undefined;
  /** Chosen provider and upstream model once selectTarget has run and a candidate was picked. */
  provider: string | undefined;
  upstreamModel: string | undefined;
  /** Upstream key name (channel) that served the request, for pricing overrides. */
  channel: string | undefined;
  /** Time from sending the upstream request to its response head, in ms. */
  upstreamTtfbMs: number | undefined;
  /** Streams: ms after startedAt when the first event carrying generated text went to the client. */
  firstTokenMs?: number | undefined;
  /** A step of a realtime session (a response's usage, a re-check): the session's own request id. */
  readonly sessionId?: string | undefined;
  /** The W3C traceparent of the request's server span when tracing is on; its usage event carries it. */
  readonly traceparent?: string | undefined;
  /** The request's store read, shared by the auth and balance hooks (hooks/builtin/request-view.ts). */
  storeView?: unknown;
  /** Hooks' own per-request state (common/request-state.ts): the first slot set and its value... */
  hookSlot?: object | undefined;
  hookValue?: unknown;
  /** ...and the others, by slot, in a map made by the second slot set. */
  hookState?: Map<object, unknown> | undefined;
  /**
   * Work the reply's last byte waits for (a stored response the client's next request may name, which
   * must be readable once the client has the reply). It must not reject.
   */
  replyHold?: Promise<void> | undefined;
  /** HTTP status sent to the client (0 until the head is written). */
  status: number;
  /** Usage as reported by the upstream (set by the usage hooks) or estimated at completion. */
  usage: Usage | undefined;
  usageStage: UsageStage | undefined;
  /**
   * Streams: why the stream was interrupted, set when usage is settled (proxy/metering.ts); undefined
   * for a stream read to its end with its final usage. The relay sets it while it reads a stream on
   * after its client left (`client_gone`) and when it stops that reading at its bound (`timeout`).
   */
  endReason?: StreamEndReason | undefined;
  /** True once any byte of the reply reached the client (retries stop here). */
  responseStarted: boolean;
  /** True when the client went away before the reply finished. */
  clientAborted: boolean;
  /** Characters of output delivered to the client, for usage estimation (kept as a running text tail). */
  deliveredText: string[];
  /** Anything a stage wants to say about the outcome, for logs; never contains prompt text or secrets. */
  error: { code: string; message: string } | undefined;
}

export type MaybePromise<T> = T | Promise<T>;

/**
 * A hook. Every stage is optional. Rules (proxy/pipeline.ts):
 * - authenticate: run in order before the request body is parsed (ctx.body and ctx.rawBody are not
 *   there yet: the method, path, query and headers are); the first `respond`, or a throw, answers the
 *   client and stops the request, its body unread.
 * - onRequest: run in order once the body is read and parsed; the first `respond` answers the client and
 *   stops the chain.
 * - selectTarget: first hook that returns a choice wins.
 * - rewriteBody: reduce; each hook gets the previous hook's request.
 * - onResponseHead: reduce over the upstream status and headers before anything is sent.
 * - onResponseChunk: reduce; synchronous by design (it runs per network chunk and must neither reorder
 *   nor delay bytes); a hook may drop parts (return []) or add parts.
 * - onResponseEnd: called once at the end of the reply; its parts flow through the later hooks'
 *   onResponseChunk. Streams use it to emit trailing events.
 * - onComplete: run all, each isolated (an exception is logged and does not reach others or the client).
 */
export interface Hook {
  readonly name: string;
  /**
   * 'observe' hooks never change parts; when every response hook of a request observes, the proxy
   * forwards upstream bytes untouched and feeds the hooks a parsed copy.
   */
  readonly responseMode?: 'observe' | 'transform';
  authenticate?(ctx: RequestContext): MaybePromise<OnRequestResult>;
  onRequest?(ctx: RequestContext): MaybePromise<OnRequestResult>;
  selectTarget?(ctx: RequestContext): MaybePromise<TargetChoice | undefined>;
  rewriteBody?(ctx: RequestContext, req: UpstreamRequest): MaybePromise<UpstreamRequest>;
  onResponseHead?(ctx: RequestContext, head: ResponseHead): ResponseHead;
  onResponseChunk?(ctx: RequestContext, parts: readonly ResponsePart[]): readonly ResponsePart[];
  onResponseEnd?(ctx: RequestContext): readonly ResponsePart[];
  onComplete?(ctx: RequestContext): MaybePromise<void>;
}

/** What a custom hook module exports (named in configuration or in a provider file's `hook` directive). */
export interface HookModule {
  /** Called once per configuration load with the options given in configuration. */
  createHook(options: Readonly<Record<string, JsonValue>>): MaybePromise<Hook>;
}

/** One server-sent event to write to the client. `data` is the text after `data: ` ("[DONE]" included). */
export interface SseOut {
  readonly event?: string | undefined;
  readonly data: string;
}

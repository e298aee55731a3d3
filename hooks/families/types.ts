// A wire family: one client-facing API dialect (completion-style, Anthropic Messages, Gemini, ...) and
// everything the gateway must know about it. The proxy core asks the registry (hooks/families/index.ts)
// and never names a family; adding one is a folder here plus one line in the registry.

import type { GatewayError } from '../../common/errors.ts';
import type { DimensionState } from '../../common/rate-limit-types.ts';
import type { ApiName, JsonObject, JsonValue, ResponsePart, SseOut, Usage } from '../../common/types.ts';
import type { StreamTransformFactory } from '../transforms/types.ts';
import type { TranslatorFactory } from '../translators/types.ts';
import type { PromptParts, UsagePreset } from '../usage/types.ts';

/** The request and token dimensions a reply describes (each the tightest of key and subject). */
export interface RateLimitState {
  readonly requests?: DimensionState | undefined;
  readonly tokens?: DimensionState | undefined;
}

/** A JSON Schema (draft 7, as ajv compiles it). */
export type JsonSchema = JsonObject;

export type BodyKind = 'json' | 'multipart';

/** An endpoint the family serves at a fixed path (always POST). */
export interface FixedRoute {
  readonly path: string;
  readonly api: ApiName;
  /** Defaults to 'json'. */
  readonly body?: BodyKind;
}

/** What a family reads out of a path it serves by pattern (a model named in the path). */
export interface PathRoute {
  readonly api: ApiName;
  /** The model named in the path, decoded. */
  readonly model: string;
  /** The path's action after the model, as the client sent it. */
  readonly action: string;
  /** The path as it goes upstream when no rule sets one, rebuilt so client escapes cannot alter it. */
  readonly upstreamPath: string;
  /** The path itself asks for a stream (no `stream` field in the body). */
  readonly stream: boolean;
}

/**
 * How the family's request bodies carry the text the model reads: what usage estimation counts when a
 * reply reports no usage (hooks/usage/estimate.ts).
 */
export interface FamilyRequestText {
  /** Keys whose values are (or contain) text the model reads, at any depth. */
  readonly keys: readonly string[];
  /** Part types (`type` values) and keys that hold media the estimator cannot count. */
  readonly mediaTypes?: readonly string[];
  readonly mediaKeys?: readonly string[];
  /** By api: the top-level fields that hold the text, and the tokens the provider adds around it. */
  readonly apis: Partial<Record<ApiName, ApiRequestText>>;
}

export interface ApiRequestText {
  readonly fields: readonly string[];
  /** Roles, separators and reply priming, counted from the body (none when absent). */
  framing?(body: JsonObject): number;
  /** Tool definitions and tool inputs, by the provider's published rules (RequestText.parts). */
  parts?(body: JsonObject, model: string): PromptParts;
}

/** A model as the registry lists it. */
export interface ListedModel {
  readonly id: string;
  readonly ownedBy: string | undefined;
}

/**
 * A family's token-counting endpoint. Its body is the body of a generation request (`countedApi`); the
 * answer is one number in the family's shape.
 */
export interface TokenCount {
  readonly api: ApiName;
  /** The generation api whose request body the counting endpoint takes. */
  readonly countedApi: ApiName;
  /** The family's answer for a count. */
  reply(tokens: number): JsonObject;
  /** The generation body inside a counting request, when the family wraps it (Gemini's generateContentRequest). */
  generationBody?(request: JsonObject): JsonObject;
  /** The count in a reply of the family's own endpoint; undefined when it has none. */
  read(reply: JsonValue): number | undefined;
  /**
   * As a provider: the counting request for a generation body of this family (translated), undefined
   * when the family's providers have no counting endpoint the pivot can reach.
   */
  requestFor?(generation: JsonObject, upstreamModel: string | undefined): JsonObject;
  /**
   * As a provider reached through the pivot: the counting request for a completion-style body, for
   * providers whose models other families' counts cannot reach otherwise (OpenAI's input_tokens).
   */
  fromPivot?(chat: JsonObject, upstreamModel: string | undefined): JsonObject;
}

/** What a trace records of a reply (GenAI semantic conventions: gen_ai.response.*). */
export interface ReplyFacts {
  id?: string;
  model?: string;
  finishReasons?: string[];
}

/** A span attribute value the family reads out of a request (numbers, strings, string lists). */
export type TraceAttribute = string | number | boolean | string[];

/**
 * What traces record of the family's requests and replies: request parameters and reply facts, never
 * prompts, completions or keys.
 */
export interface FamilyTelemetry {
  /** Hands `set` the gen_ai.request.* attributes of a request body in the family's shape. */
  requestAttributes(body: JsonObject, set: (key: string, value: TraceAttribute) => void): void;
  /** The request's cap on output tokens (gen_ai.request.max_tokens), read without walking the body. */
  maxOutputTokens(body: JsonObject): number | undefined;
  /** Adds the facts a reply body, or one stream event's data (parsed), carries. */
  readReply(reply: JsonValue, facts: ReplyFacts): void;
  /**
   * Matches the text of the stream events that can end the reply (a finish reason, a final status): once
   * the id and model are known, only those are parsed for facts.
   */
  readonly finishMarker: RegExp;
}

/** Usage of one model response of a realtime session, with the response's id (or turn number). */
export interface RealtimeUsage {
  readonly responseId: string;
  readonly usage: Usage;
}

/**
 * A realtime API of the family: a WebSocket session (`GET` upgraded) whose frames the gateway relays
 * unchanged (or through a realtime translator), reading the server's usage messages (docs/realtime.md).
 */
export interface RealtimeDialect {
  readonly api: ApiName;
  /** Whether an upgrade request's path is this dialect's. */
  matches(path: string): boolean;
  /** Where the session's model is named: the query's `model`, or the client's first message. */
  readonly modelIn: 'query' | 'first-message';
  /** The model a first message names, undefined when it names none (not the setup message). */
  firstMessageModel?(message: JsonObject): string | undefined;
  /** The first message with the model the registry maps to (the upstream's name). */
  withModel?(message: JsonObject, model: string): JsonObject;
  /** A subprotocol that carries the access key (`openai-insecure-api-key.`): read, never forwarded. */
  readonly keyProtocolPrefix?: string;
  /** Query parameters that carry the access key (read, never forwarded). */
  readonly keyQuery?: readonly string[];
  /** Substrings of the server message that starts a model response (a response is then in progress). */
  readonly responseMarkers: readonly string[];
  /** Substrings one of which a server message has when it may carry usage (checked before parsing). */
  readonly usageMarkers: readonly string[];
  /**
   * The usage of a response the client cut (left mid-response) when the protocol cannot cancel it with
   * a usage report: estimated from the server messages relayed during it and the last reported usage.
   */
  estimateCut?(relayed: readonly JsonObject[], model: string, previous: Usage | undefined): Usage;
  /** What cancels the response in progress (sent when the client leaves mid-response). */
  readonly cancelMessage?: JsonObject;
  /** The usage a server message reports for one model response; `turn` numbers responses without ids. */
  usage(message: JsonObject, turn: number): RealtimeUsage | undefined;
}

/** What a realtime translator knows of its session when it starts. */
export interface RealtimeTranslatorInit {
  /** The model as the client named it (echoed back). */
  readonly model: string;
  /** The model the upstream is asked for (the registry's mapping). */
  readonly upstreamModel: string;
  /** Ids of the client's dialect (`resp_...`); random unless a test fixes them. */
  readonly newId?: (prefix: string) => string;
  /** Unix seconds, for `expires_at`-like fields. */
  readonly now?: () => number;
}

/** What one message becomes: messages for the upstream and for the client, in order. */
export interface RealtimeOutput {
  readonly upstream: JsonObject[];
  readonly client: JsonObject[];
  /**
   * Closes the client's socket after the messages (a dialect without error messages, Gemini Live,
   * answers a message it cannot serve this way).
   */
  close?: { readonly code: number; readonly reason: string };
}

/**
 * One session's translator between a client's realtime dialect and an upstream's. Every message of
 * either side passes through it, in order; it keeps the session's state (configuration, the response
 * in progress, ids). It never sees the gateway's sockets.
 */
export interface RealtimeTranslator {
  /** What the client gets as the session opens (before the upstream has said anything). */
  open(): RealtimeOutput;
  /** A client message; undefined when the frame was not a JSON object (`binary`: it came as a binary frame). */
  fromClient(message: JsonObject | undefined, binary: boolean): RealtimeOutput;
  /** An upstream message; undefined when it was not a JSON object. */
  fromUpstream(message: JsonObject | undefined): RealtimeOutput;
  /** The id the client knows the unfinished response by (a cut one is billed under it). */
  readonly responseInProgress: string | undefined;
}

/** A realtime translator by its DSL name (`req_map` of a realtime rule): `<client>_to_<upstream>`. */
export interface RealtimeTranslatorFactory {
  readonly name: string;
  /** The realtime api of its clients (the rule's api). */
  readonly from: ApiName;
  /** The realtime api of the upstream it speaks to. */
  readonly to: ApiName;
  /**
   * Whose messages usage is read from: the translated ones the client receives, in its dialect (the
   * default), or the upstream's own, in the upstream's dialect (the client frames made of a message
   * that reports usage then wait for its event, as that message would).
   */
  readonly usageFrom?: 'client' | 'upstream';
  create(init: RealtimeTranslatorInit): RealtimeTranslator;
}

export interface WireFamily {
  /** The family's name: the client format of its routes (RequestContext.clientFormat) and translators. */
  readonly name: string;

  // Routes
  readonly routes: readonly FixedRoute[];
  /**
   * POST paths served by pattern: the route, 'bad_path' when the path is the family's but malformed
   * (undecodable escapes), or undefined when it is not the family's.
   */
  matchPath?(path: string): PathRoute | 'bad_path' | undefined;
  /** Paths of other requests (unknown endpoint, wrong method) whose errors this family shapes. */
  ownsPath?(path: string): boolean;

  // Model listing (GET/HEAD)
  readonly models?: {
    /** Paths that list models; the item paths are `<path>/<id>`. */
    readonly paths: readonly string[];
    /** A model is listed when one of its providers has a rule for one of these apis. */
    readonly apis: readonly ApiName[];
    list(models: readonly ListedModel[], created: number): JsonValue;
    item(model: ListedModel, created: number): JsonValue;
  };

  // Credentials and upstream request
  /** Request headers that carry the client's access key (tried in order after `Authorization: Bearer`). */
  readonly keyHeaders: readonly string[];
  /** A query parameter that carries the access key. */
  readonly keyQuery?: string;
  /**
   * The client's key carrier (or one of `sdkHeaders`) marks it as one of this family's SDKs: on a
   * model-list path several families serve, this family answers.
   */
  readonly claimsModelPathsByCarrier?: boolean;
  /** Request headers only this family's SDKs send (the Anthropic SDKs' `anthropic-version`). */
  readonly sdkHeaders?: readonly string[];
  /** Client request headers forwarded upstream: protocol versions and betas, never credentials. */
  readonly forwardedHeaders: readonly string[];
  /** Query parameters the upstream request needs for an api of this family (`alt=sse`). */
  upstreamQuery?(api: ApiName): Readonly<Record<string, string>> | undefined;

  /**
   * JSON Schemas of its apis' JSON request bodies: only the fields routing, metering and translation
   * read (the upstream checks the rest). The core compiles them once; a body that fails is a 400 naming
   * the field.
   */
  readonly bodySchemas?: Partial<Record<ApiName, JsonSchema>>;

  // Errors
  /** The family's error type (or status name) for an HTTP status: one table, for gateway and translators. */
  errorType(status: number): string;
  /** The body of an error the gateway answers itself, in the shape the family's SDKs raise. */
  errorBody(err: GatewayError, requestId: string): JsonObject;
  /**
   * The SSE event that ends a stream with that error; `eventsSent` is how many events the client already
   * has (a family that numbers its events continues the count).
   */
  errorEvent(err: GatewayError, requestId: string, eventsSent?: number): SseOut;

  // Rate limits (docs/operations.md "Rate limits per key and subject")
  /** The gateway's limits as the vendor's own rate-limit headers say them (none: the family has none). */
  rateLimitHeaders?(state: RateLimitState, now: number, out: Record<string, string>): Record<string, string>;
  /** Prefixes of the vendor's rate-limit headers: a provider's are dropped where a gateway limit applies. */
  readonly rateLimitHeaderPrefixes?: readonly string[];

  // Usage and billing
  /** Usage presets that read this family's replies (`usage_extract <name>`). */
  readonly usagePresets: readonly UsagePreset[];
  /** Top-level reply fields that carry usage counts, not generated text (skipped by estimation). */
  readonly usageFields: readonly string[];
  /** Usage events of its requests carry the completion-style aliases (docs/billing.md "The usage event"). */
  readonly completionStyleUsage: boolean;
  /** Where its request bodies hold text, for estimating usage a reply does not report. */
  readonly requestText?: FamilyRequestText;
  /**
   * Reply fields whose string values are generated text, in whole replies and stream events (the
   * estimate of delivered output, the time to the first token).
   */
  readonly replyTextFields: readonly string[];

  // Stream framing
  /** The data of the event that ends its streams and carries nothing else (`[DONE]`). */
  readonly streamEnd?: string;

  /**
   * Translators between this family and the completion-style one, both directions (DSL `req_map`,
   * `resp_map`, `sse_parse`); they live in the family that is not completion-style.
   */
  readonly translators: readonly TranslatorFactory[];
  /** SSE transforms of the family's streams that are not translations (DSL `sse_parse`). */
  readonly transforms?: readonly StreamTransformFactory[];

  /** The family's token-counting endpoint, when it has one. */
  readonly tokenCount?: TokenCount;
  /**
   * Its streams state the input tokens before any output (Anthropic's message_start): a stream the
   * gateway translates for it asks the serving provider's count alongside the generation
   * (proxy/early-count.ts) unless the provider's own stream opens with one.
   */
  readonly streamStatesInput?: boolean;

  /** GenAI trace attributes of its requests and replies. */
  readonly telemetry?: FamilyTelemetry;

  /** Its realtime (WebSocket) APIs. */
  readonly realtime?: readonly RealtimeDialect[];
  /**
   * Realtime translators between this family and the completion-style one, both directions; like
   * `translators`, they live in the family that is not completion-style.
   */
  readonly realtimeTranslators?: readonly RealtimeTranslatorFactory[];
}

/** Percent-decoding of client input: undefined for malformed escapes (the client's 400, not a 500). */
export function decodePathPart(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/**
 * A binary stream framing an upstream may answer in instead of SSE (AWS event streams), chosen by the
 * reply's content type: it turns network chunks, split anywhere, into the `event` parts the rule's hooks
 * see, as the SSE reader does for text streams.
 */
export interface StreamFraming {
  readonly name: string;
  /** The reply content type it decodes (lower case, without parameters). */
  readonly contentType: string;
  create(): StreamFramingDecoder;
}

export interface StreamFramingDecoder {
  /** The events completed by this chunk; throws on a corrupt stream (the upstream's fault). */
  decode(chunk: Uint8Array): ResponsePart[];
  /** The stream ended: throws when it ended inside a message. */
  end(): ResponsePart[];
}

/**
 * The wire of upstreams no client speaks (AWS Bedrock): translators from the pivot, stream transforms,
 * usage presets and stream framings, without routes, key carriers or error shapes. The registry lists
 * them in its tables (`registerProviderWire`).
 */
export interface ProviderWire {
  readonly name: string;
  /** Translators from the pivot (or another family) to this wire; the registry composes the rest. */
  readonly translators: readonly TranslatorFactory[];
  /**
   * Translators made from the registered ones, once the compositions exist (`<client>_to_<wire>` for
   * every `<client>_to_<family>` when the wire carries that family's bodies).
   */
  derive?(translators: ReadonlyMap<string, TranslatorFactory>): TranslatorFactory[];
  readonly transforms?: readonly StreamTransformFactory[];
  readonly usagePresets: readonly UsagePreset[];
  readonly framings?: readonly StreamFraming[];
  /**
   * For upstreams that name an error beside its status (Bedrock's `x-amzn-errortype`): the status the
   * client gets for an error reply of one of `formats` (the `to` of the translators that call it).
   */
  readonly errorStatus?: UpstreamErrorStatus;
  /** Its counting endpoints, one per upstream format: `<client>_count_to_<format>` for every client family. */
  readonly tokenCounts?: readonly WireTokenCount[];
}

export interface UpstreamErrorStatus {
  readonly formats: readonly string[];
  status(status: number, headers: Readonly<Record<string, string>>): number;
}

/** A provider wire's counting endpoint for the bodies of one of its formats (`bedrock_invoke`). */
export interface WireTokenCount {
  /** The upstream format of the generation translators whose bodies it counts (`<client>_to_<format>`). */
  readonly format: string;
  requestFor(generation: JsonObject, upstreamModel: string | undefined): JsonObject;
  read(reply: JsonValue): number | undefined;
}

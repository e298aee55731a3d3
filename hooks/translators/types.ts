// Translators convert between wire formats for one request. A factory is compiled once; `create` makes a
// small per-request object so that request-time facts (model, stream flag, tool names, whether the
// client asked for usage) flow into the reply mapping. One file per direction, named by direction:
// `openai-to-anthropic.ts` (DSL name `openai_to_anthropic`) = a completion-style client talking to an
// Anthropic upstream. They live in the folder of the family that is not completion-style
// (hooks/families/anthropic/, hooks/families/gemini/), which registers them.
//
// Streams are incremental: `streamEvent` sees one upstream SSE event at a time (already split and
// UTF-8 decoded by the proxy's SSE parser) and returns the client events to emit now. Memory per stream
// stays constant: keep counters and the few ids needed, never the accumulated text.

import type { IncomingHttpHeaders } from 'node:http';
import type { JsonObject, JsonValue, SseOut, WireFormat } from '../../common/types.ts';

export interface TranslatorInit {
  readonly requestId: string;
  /** Model as the client named it (echoed back in replies). */
  readonly model: string | undefined;
  /** Model sent upstream. */
  readonly upstreamModel: string | undefined;
  readonly stream: boolean;
  /** Unix seconds of the request, for `created` fields. */
  readonly createdAt: number;
  /**
   * The request's input, for replies that must state it before the upstream's final report (Anthropic's
   * message_start): the upstream's own count when its stream already gave one, else the serving
   * provider's count asked alongside the generation, else the gateway's estimate of the body as the
   * provider reads it (docs/billing.md "Where the counts come from"). Computed when called.
   */
  readonly inputCount?: () => InputCount;
  /** The client's request headers (a wire that carries a header in its body: Bedrock's `anthropic_beta`). */
  readonly headers?: IncomingHttpHeaders;
}

/** Input tokens as a reply states them before the upstream's final report. */
export interface InputCount {
  /** The whole input, cache reads included. */
  readonly tokens: number;
  /** The part of it the upstream reported read from its prompt cache (0 when unknown). */
  readonly cacheRead: number;
  /** Where the number comes from. */
  readonly source: 'upstream' | 'provider' | 'estimate';
}

export interface Translator {
  /** Map the client's JSON request body to the upstream body. Throws TranslationError on bad input. */
  request(body: JsonObject): JsonObject;
  /** Map a complete 2xx upstream JSON reply to the client's shape. */
  response(body: JsonValue): JsonValue;
  /** Map one upstream SSE event to zero or more client events. */
  streamEvent(event: string | undefined, data: string): SseOut[];
  /**
   * The upstream stream ended. Return trailing events (e.g. `[DONE]`). When `complete` is false the
   * upstream ended before its final event: return an error event the client's SDK understands.
   */
  streamEnd(complete: boolean): SseOut[];
  /**
   * Map an upstream error body (status >= 400) to the client's error shape; status is kept. Throws a
   * GatewayError instead when the gateway answers that error with a code of its own catalogue (a
   * provider's throttling: `upstream_rate_limited`), which the client gets in its family's shape.
   */
  error(status: number, body: JsonValue | string): JsonValue;
}

export interface TranslatorFactory {
  /** DSL name: the file name in snake_case (`openai-to-anthropic.ts` -> `openai_to_anthropic`). */
  readonly name: string;
  /** Client wire format. */
  readonly from: WireFormat;
  /** Upstream wire format. */
  readonly to: WireFormat;
  create(init: TranslatorInit): Translator;
}

/**
 * A factory named `<from>[_<detail>]_to_<to>`: the client and upstream formats are read from the name. A
 * provider wire's format may have words of its own (`openai_to_bedrock_converse`).
 */
export function defineTranslator(
  name: string,
  create: (init: TranslatorInit) => Translator,
): TranslatorFactory {
  const match = /^([a-z]+)(?:_[a-z_]+)?_to_([a-z]+(?:_[a-z]+)*)$/.exec(name);
  if (!match) throw new Error(`translator name ${name} is not <from>_to_<to>`);
  return { name, from: match[1]!, to: match[2]!, create };
}

/** A client request that cannot be translated (unsupported field value, bad shape). Becomes a 400. */
export class TranslationError extends Error {
  readonly field: string | undefined;
  constructor(message: string, field?: string) {
    super(message);
    this.name = 'TranslationError';
    this.field = field;
  }
}

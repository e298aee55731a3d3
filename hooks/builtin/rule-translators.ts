// The translators and stream transforms a provider rule (hooks/builtin/provider-rule.ts) runs for a
// request: created on first use, kept with the request and shared by its request, reply and stream
// mappings.

import { errorText, GatewayError } from '../../common/errors.ts';
import { RequestState } from '../../common/request-state.ts';
import type { JsonObject, JsonValue, RequestContext } from '../../common/types.ts';
import { generationTextOf, requestTextOf } from '../families/index.ts';
import type { StreamTransform, StreamTransformFactory } from '../transforms/types.ts';
import type { InputCount, Translator, TranslatorFactory } from '../translators/types.ts';
import { providerInputCount } from '../usage/early-input.ts';
import { estimateInputTokens } from '../usage/estimate.ts';
import type { RequestText } from '../usage/types.ts';
import { streamUsage } from './usage-meter.ts';

export interface StreamEvent {
  event?: string | undefined;
  data: string;
}

export interface StreamStep {
  event(event: string | undefined, data: string): StreamEvent[];
  end(complete: boolean): StreamEvent[];
}

/** Per-request state of a rule: the translator objects it created, and the stream steps. */
export interface RuleState {
  translators: Map<string, Translator>;
  steps: StreamStep[] | undefined;
}

/** A request as its serving provider reads it: the translated body, and where that body holds text. */
export interface ServedRequest {
  readonly body: JsonObject;
  readonly requestText: RequestText;
}

const SERVED = new RequestState<ServedRequest | undefined>();

/**
 * The request as the provider reads it once a rule's req_map translated it to a family the estimate
 * knows, for estimates in the serving provider's framing; undefined when it was not translated.
 */
export function servedRequestOf(ctx: RequestContext): ServedRequest | undefined {
  return SERVED.get(ctx);
}

/**
 * The request's input as a stream states it before the upstream's final report: what the upstream's
 * stream reported so far (Gemini's first chunk; the usage meter reads each event before the
 * translators), else the serving provider's count asked alongside the generation, else the estimate of
 * the body as the serving provider reads it (the translated body in its family's framing).
 */
function inputCountOf(ctx: RequestContext): InputCount {
  const reported = streamUsage(ctx)?.result();
  if (reported !== undefined && reported.inputTokens > 0) {
    return { tokens: reported.inputTokens, cacheRead: reported.cacheReadTokens ?? 0, source: 'upstream' };
  }
  const counted = providerInputCount(ctx);
  if (counted !== undefined) return { tokens: counted, cacheRead: 0, source: 'provider' };
  const served = SERVED.get(ctx);
  const tokens = estimateInputTokens(
    ctx.upstreamModel ?? ctx.model ?? '',
    served?.requestText ?? requestTextOf(ctx.clientFormat, ctx.api),
    served?.body ?? ctx.body,
  );
  return { tokens, cacheRead: 0, source: 'estimate' };
}

export class RuleTranslators {
  readonly #states = new RequestState<RuleState>();
  readonly #translators: ReadonlyMap<string, TranslatorFactory>;
  readonly #transforms: ReadonlyMap<string, StreamTransformFactory>;
  /** The rule's sse_parse names, in order: translators or transforms. */
  readonly #streamSteps: readonly string[];

  constructor(
    translators: ReadonlyMap<string, TranslatorFactory>,
    transforms: ReadonlyMap<string, StreamTransformFactory>,
    streamSteps: readonly string[],
  ) {
    this.#translators = translators;
    this.#transforms = transforms;
    this.#streamSteps = streamSteps;
  }

  state(ctx: RequestContext): RuleState {
    let s = this.#states.get(ctx);
    if (s === undefined) {
      s = { translators: new Map(), steps: undefined };
      this.#states.set(ctx, s);
    }
    return s;
  }

  translator(ctx: RequestContext, name: string): Translator {
    const s = this.state(ctx);
    let t = s.translators.get(name);
    if (t === undefined) {
      const factory = this.#translators.get(name)!;
      t = factory.create({
        requestId: ctx.id,
        model: ctx.model,
        upstreamModel: ctx.upstreamModel,
        stream: ctx.stream,
        createdAt: Math.floor(ctx.receivedAt / 1000),
        headers: ctx.headers,
        inputCount: () => inputCountOf(ctx),
      });
      s.translators.set(name, t);
    }
    return t;
  }

  /** A rule rewrites the request for its upstream: what an earlier candidate's rule translated is gone. */
  forgetServed(ctx: RequestContext): void {
    if (SERVED.get(ctx) !== undefined) SERVED.set(ctx, undefined);
  }

  /** The rule's req_map: the client body translated for the upstream, kept for the input estimate. */
  mapRequest(ctx: RequestContext, name: string, body: JsonObject): JsonObject {
    const upstream = this.translator(ctx, name).request(body);
    const requestText = generationTextOf(this.#translators.get(name)!.to);
    if (requestText !== undefined) SERVED.set(ctx, { body: upstream, requestText });
    return upstream;
  }

  /** A 2xx reply the translator cannot read is the upstream's fault: 502, never a 500. */
  mapReply(ctx: RequestContext, name: string, value: JsonValue): JsonValue {
    try {
      return this.translator(ctx, name).response(value);
    } catch (err) {
      ctx.log.warn({ translator: name, err: errorText(err) }, 'unreadable upstream reply');
      throw new GatewayError(
        'upstream_bad_response',
        'The upstream provider sent a reply that cannot be translated',
      );
    }
  }

  streamStepsFor(ctx: RequestContext): StreamStep[] {
    const s = this.state(ctx);
    if (s.steps === undefined) {
      s.steps = this.#streamSteps.map((name): StreamStep => {
        if (this.#translators.has(name)) {
          const t = this.translator(ctx, name);
          return { event: (e, d) => t.streamEvent(e, d), end: (complete) => t.streamEnd(complete) };
        }
        const tr: StreamTransform = this.#transforms.get(name)!.create(ctx);
        return { event: (e, d) => tr.event(e, d), end: () => tr.end() };
      });
    }
    return s.steps;
  }
}

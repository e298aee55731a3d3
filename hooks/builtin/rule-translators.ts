// The translators and stream transforms a provider rule (hooks/builtin/provider-rule.ts) runs for a
// request: created on first use, kept with the request and shared by its request, reply and stream
// mappings.

import { errorText, GatewayError } from '../../common/errors.ts';
import { RequestState } from '../../common/request-state.ts';
import type { JsonObject, JsonValue, RequestContext } from '../../common/types.ts';
import { generationTextOf, requestTextOf } from '../families/index.ts';
import type { StreamTransform, StreamTransformFactory } from '../transforms/types.ts';
import type { Translator, TranslatorFactory } from '../translators/types.ts';
import { estimateInputTokens } from '../usage/estimate.ts';

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
  /** The body as the upstream reads it, with its wire format, once a req_map translated it. */
  served?: { body: JsonObject; format: string } | undefined;
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
        inputTokens: () => {
          // Counted as the serving provider reads it: the translated body in its family's framing.
          const served = s.served;
          const text = served === undefined ? undefined : generationTextOf(served.format);
          const model = ctx.upstreamModel ?? ctx.model ?? '';
          return served !== undefined && text !== undefined
            ? estimateInputTokens(model, text, served.body)
            : estimateInputTokens(model, requestTextOf(ctx.clientFormat, ctx.api), ctx.body);
        },
      });
      s.translators.set(name, t);
    }
    return t;
  }

  /** The rule's req_map: the client body translated for the upstream, kept for the input estimate. */
  mapRequest(ctx: RequestContext, name: string, body: JsonObject): JsonObject {
    const upstream = this.translator(ctx, name).request(body);
    this.state(ctx).served = { body: upstream, format: this.#translators.get(name)!.to };
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

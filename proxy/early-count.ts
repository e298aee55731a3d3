// The serving provider's count of a streamed request's input, asked alongside the generation, for a
// client whose stream states its input before any output (Anthropic's message_start) when another
// family serves it. The count goes where a count request of the client would go on that provider (its
// `messages.count_tokens` rule: Gemini's and Vertex's countTokens, Bedrock's CountTokens), else to the
// provider's counting endpoint for pivot bodies (OpenAI's POST /v1/responses/input_tokens), through
// that rule's rewrite and credential (SigV4, OAuth), as the count endpoint would be asked
// (proxy/provider-count.ts). It is not a client request: no hook of the pipeline sees it, so it is
// neither billed nor counted toward rate limits.
//
// The relay waits for both the count and the upstream's reply; once `limits.early_count_wait_ms` (1 s)
// have passed since the count was asked, it stops waiting, cancels the count and logs it, and
// message_start states the gateway's estimate. A provider whose stream opens with its own count
// (Gemini's usageMetadata, Anthropic's message_start: the usage preset's `inputFirst`) is not asked;
// the translator reads that count from the first event. Streams of other client families never wait.

import type { IncomingHttpHeaders } from 'node:http';
import { errorText } from '../common/errors.ts';
import type { JsonObject, JsonValue, Principal, RequestContext, Usage } from '../common/types.ts';
import { servedRequestOf } from '../hooks/builtin/rule-translators.ts';
import type { CompiledProvider, CompiledRule } from '../hooks/dsl/types.ts';
import { DEFAULT_FAMILY, earlyInputCount, TRANSLATORS, USAGE_PRESETS } from '../hooks/families/index.ts';
import type { TokenCount } from '../hooks/families/types.ts';
import { forgetProviderInputCount, setProviderInputCount } from '../hooks/usage/early-input.ts';
import { askProviderCount, pivotCountRule } from './provider-count.ts';
import type { Context } from './request-context.ts';
import type { Runtime } from './runtime.ts';
import { Cancellation } from './upstream.ts';

/** A count asked alongside one generation attempt. */
export interface EarlyCount {
  /**
   * Resolves once the count is in (then the stream's first event states it) or the wait is over (then
   * it states the estimate); never rejects.
   */
  ready(): Promise<void>;
  /**
   * The attempt is over without a stream (refused, failed): stop waiting, cancel the count, and forget
   * it if it came (the next candidate's stream and usage are another provider's).
   */
  cancel(): void;
}

/** Whether a rule's streams are translated for the client and its upstream's stream does not open with a count. */
const ASKS = new WeakMap<CompiledRule, boolean>();

function ruleMayAsk(rule: CompiledRule): boolean {
  let asks = ASKS.get(rule);
  if (asks === undefined) {
    const translates = rule.response.some((op) => op.op === 'sse_parse' && TRANSLATORS.has(op.transform));
    const extract = rule.metrics.find((op) => op.op === 'usage_extract');
    const preset = extract?.op === 'usage_extract' ? USAGE_PRESETS.get(extract.preset) : undefined;
    asks = translates && preset?.inputFirst !== true;
    ASKS.set(rule, asks);
  }
  return asks;
}

/** What is sent where, and how the reply is read. */
interface CountRoute {
  readonly rule: CompiledRule;
  readonly count: TokenCount;
  readonly body: JsonObject;
}

function countRoute(
  rt: Runtime,
  ctx: Context,
  provider: CompiledProvider,
  generation: CompiledRule,
  clientCount: TokenCount,
): CountRoute | undefined {
  const model = ctx.upstreamModel ?? ctx.model;
  const body = ctx.body!;
  // The client's own counting request on this provider (forwarded or translated, as a count request
  // of the client would be).
  const own = rt.matchRule(provider, clientCount.api, false, model);
  if (own !== undefined) {
    const named = typeof body.model === 'string' && ctx.upstreamModel !== undefined;
    return { rule: own, count: clientCount, body: named ? { ...body, model: ctx.upstreamModel! } : body };
  }
  // A provider counting only pivot bodies: the body as the generation translated it, in the counting
  // family's request shape.
  const target = pivotCountRule(rt, provider, model);
  const served = servedRequestOf(ctx);
  if (target === undefined || served === undefined || requestFormat(generation) !== DEFAULT_FAMILY.name)
    return undefined;
  return { rule: target.rule, count: target.count, body: target.count.fromPivot!(served.body, model) };
}

/** The format a rule's req_map translates the request to, when it has one. */
function requestFormat(rule: CompiledRule): string | undefined {
  const op = rule.request.find((o) => o.op === 'req_map');
  return op?.op === 'req_map' ? TRANSLATORS.get(op.translator)?.to : undefined;
}

/** The count in the provider's reply, through the rule's reply mapping into the counting family's shape. */
function readCount(
  ctx: RequestContext,
  route: Pick<CountRoute, 'rule' | 'count'>,
  reply: JsonValue,
): number | undefined {
  const op = route.rule.response.find((o) => o.op === 'resp_map');
  let value = reply;
  if (op?.op === 'resp_map') {
    const factory = TRANSLATORS.get(op.translator);
    if (factory === undefined) return undefined;
    try {
      value = factory
        .create({
          requestId: ctx.id,
          model: ctx.model,
          upstreamModel: ctx.upstreamModel,
          stream: false,
          createdAt: Math.floor(ctx.receivedAt / 1000),
        })
        .response(reply);
    } catch {
      return undefined;
    }
  }
  return route.count.read(value);
}

/**
 * Asks the provider's count of the request's input alongside the generation about to be sent by
 * `rule`, when the client's stream states its input first and the provider's stream does not; undefined
 * when nothing is asked (then nothing waits).
 */
export function askEarlyCount(
  rt: Runtime,
  ctx: Context,
  provider: CompiledProvider,
  rule: CompiledRule,
): EarlyCount | undefined {
  const waitMs = rt.config.limits.earlyCountWaitMs;
  if (!ctx.stream || ctx.body === undefined || waitMs <= 0) return undefined;
  const clientCount = earlyInputCount(ctx.clientFormat, ctx.api);
  if (clientCount === undefined || !ruleMayAsk(rule)) return undefined;
  let route: CountRoute | undefined;
  try {
    route = countRoute(rt, ctx, provider, rule, clientCount);
  } catch (err) {
    // The generation is on its way whatever happens here: its stream states the estimate.
    ctx.log.warn({ provider: provider.name, err: errorText(err) }, 'provider count not asked');
    return undefined;
  }
  if (route === undefined) return undefined;

  const cancel = new Cancellation();
  let over = false;
  let timer: NodeJS.Timeout | undefined;
  // What the reply is read with; the body (a copy of the prompt) is not kept once it is sent.
  const reading = { rule: route.rule, count: route.count };
  const side = new CountContext(ctx, route.count.api);
  const asked = askProviderCount(rt, side, provider.name, route.rule, route.body, cancel).then((reply) => {
    const tokens = reply === undefined ? undefined : readCount(ctx, reading, reply);
    if (!over && tokens !== undefined) setProviderInputCount(ctx, tokens);
  });
  const deadline = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), waitMs);
    timer.unref();
  });
  const finish = () => {
    over = true;
    if (timer !== undefined) clearTimeout(timer);
    cancel.cancel();
  };
  const ready = Promise.race([asked, deadline]).then((outcome) => {
    if (outcome === 'late' && !over) {
      ctx.log.warn(
        { provider: provider.name, waitMs },
        'provider count not in time; message_start states the estimate',
      );
    }
    finish();
  });
  return {
    ready: () => ready,
    cancel: () => {
      finish();
      forgetProviderInputCount(ctx);
    },
  };
}

/**
 * The count's own request context: the client request's identity, headers, model and log, with a state
 * of its own, so the counting rule's translators never touch the generation's (its translated body, on
 * which the estimate and metering rely).
 */
class CountContext implements RequestContext {
  readonly id: string;
  readonly correlationId: string | undefined;
  readonly api: RequestContext['api'];
  readonly clientFormat: RequestContext['clientFormat'];
  readonly method = 'POST';
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  readonly receivedAt: number;
  readonly startedAt: number;
  body: JsonObject | undefined;
  rawBody: Buffer;
  model: string | undefined;
  stream = false;
  principal: Principal | undefined;
  provider: string | undefined;
  upstreamModel: string | undefined;
  channel: string | undefined = undefined;
  upstreamTtfbMs: number | undefined = undefined;
  hookSlot: object | undefined = undefined;
  hookValue: unknown = undefined;
  hookState: Map<object, unknown> | undefined = undefined;
  status = 0;
  usage: Usage | undefined = undefined;
  usageStage: RequestContext['usageStage'] = undefined;
  responseStarted = false;
  clientAborted = false;
  deliveredText: string[] = [];
  error: RequestContext['error'] = undefined;
  readonly #parent: Context;

  constructor(parent: Context, api: RequestContext['api']) {
    this.#parent = parent;
    this.id = parent.id;
    this.correlationId = parent.correlationId;
    this.api = api;
    this.clientFormat = parent.clientFormat;
    this.path = parent.path;
    this.query = parent.query;
    this.headers = parent.headers;
    this.receivedAt = parent.receivedAt;
    this.startedAt = parent.startedAt;
    this.body = parent.body;
    this.rawBody = parent.rawBody;
    this.model = parent.model;
    this.principal = parent.principal;
    this.provider = parent.provider;
    this.upstreamModel = parent.upstreamModel;
  }

  get log(): RequestContext['log'] {
    return this.#parent.log;
  }

  get signal(): AbortSignal {
    return this.#parent.signal;
  }
}

// The DSL at request time: one hook per compiled match rule, built once per configuration load. It
// rewrites the upstream request (auth, headers, JSON ops, translator request mapping, path and query)
// and, when the rule maps responses, transforms JSON replies and stream events through the rule's
// translators and transforms. Rules that only pass responses through get no response methods at all,
// so the proxy can forward upstream bytes untouched.

import { splitBaseUrl } from '../../common/base-url.ts';
import type { UpstreamKey } from '../../common/config-types.ts';
import { GatewayError } from '../../common/errors.ts';
import { providerKeyEnvName } from '../../common/provider-key-env.ts';
import { RequestState } from '../../common/request-state.ts';
import {
  type Hook,
  type JsonObject,
  type JsonValue,
  REALTIME_APIS,
  type RequestContext,
  type ResponsePart,
  type UpstreamRequest,
} from '../../common/types.ts';
import { jsonDeleteCopy, jsonSetCopy } from '../dsl/json-path.ts';
import { renderHeaderTemplate, renderTemplate } from '../dsl/template.ts';
import type { CompiledRule, CompiledTemplate } from '../dsl/types.ts';
import { requestTextOf } from '../families/index.ts';
import type { StreamTransform, StreamTransformFactory } from '../transforms/types.ts';
import { TranslationError, type Translator, type TranslatorFactory } from '../translators/types.ts';
import { estimateInputTokens } from '../usage/estimate.ts';

type TemplateVars = Parameters<typeof renderTemplate>[1];

export interface RuleHookDeps {
  readonly provider: string;
  readonly translators: ReadonlyMap<string, TranslatorFactory>;
  readonly transforms: ReadonlyMap<string, StreamTransformFactory>;
  /** Upstream keys of this provider (round robin); empty when none is configured. */
  readonly keys: readonly UpstreamKey[];
}

interface StreamStep {
  event(event: string | undefined, data: string): { event?: string | undefined; data: string }[];
  end(complete: boolean): { event?: string | undefined; data: string }[];
}

/** Per-request state of a rule: the translator objects it created, and the stream steps. */
interface RuleState {
  translators: Map<string, Translator>;
  steps: StreamStep[] | undefined;
}

export function createRuleHook(rule: CompiledRule, deps: RuleHookDeps): Hook {
  const states = new RequestState<RuleState>();
  let keyCursor = 0;
  // A base_url may carry a path prefix (a corporate proxy, Azure resources): set_path paths go below it.
  const pathPrefix = splitBaseUrl(rule.upstreamConfig.baseUrl).prefix;

  const jsonMappers = rule.response.filter((op) => op.op === 'resp_map').map((op) => op.translator);
  const streamSteps = rule.response.filter((op) => op.op === 'sse_parse').map((op) => op.transform);
  const transformsResponse = jsonMappers.length > 0 || streamSteps.length > 0;
  // The translator that shapes error bodies: the rule's first resp_map, else its first translating
  // sse_parse (a streaming rule's errors arrive as JSON and must reach the client in its own shape).
  const errorMapper = jsonMappers[0] ?? streamSteps.find((name) => deps.translators.has(name));

  for (const name of [...jsonMappers, ...streamSteps]) {
    if (!deps.translators.has(name) && !deps.transforms.has(name)) {
      throw new Error(`rule ${rule.loc.file}:${rule.loc.line}: unknown translator or transform "${name}"`);
    }
  }
  // A realtime rule's req_map names a realtime translator, which the session runs on its frames.
  const requestOps = REALTIME_APIS.has(rule.api)
    ? rule.request.filter((op) => op.op !== 'req_map')
    : rule.request;
  for (const op of requestOps) {
    if (op.op === 'req_map' && !deps.translators.has(op.translator)) {
      throw new Error(`rule ${rule.loc.file}:${rule.loc.line}: unknown translator "${op.translator}"`);
    }
  }

  function state(ctx: RequestContext): RuleState {
    let s = states.get(ctx);
    if (s === undefined) {
      s = { translators: new Map(), steps: undefined };
      states.set(ctx, s);
    }
    return s;
  }

  function translator(ctx: RequestContext, name: string): Translator {
    const s = state(ctx);
    let t = s.translators.get(name);
    if (t === undefined) {
      const factory = deps.translators.get(name)!;
      t = factory.create({
        requestId: ctx.id,
        model: ctx.model,
        upstreamModel: ctx.upstreamModel,
        stream: ctx.stream,
        createdAt: Math.floor(ctx.receivedAt / 1000),
        inputTokens: () =>
          estimateInputTokens(
            ctx.upstreamModel ?? ctx.model ?? '',
            requestTextOf(ctx.clientFormat, ctx.api),
            ctx.body,
          ),
      });
      s.translators.set(name, t);
    }
    return t;
  }

  /** A 2xx reply the translator cannot read is the upstream's fault: 502, never a 500. */
  function mapReply(ctx: RequestContext, name: string, value: JsonValue): JsonValue {
    try {
      return translator(ctx, name).response(value);
    } catch (err) {
      ctx.log.warn(
        { translator: name, err: err instanceof Error ? err.message : String(err) },
        'unreadable upstream reply',
      );
      throw new GatewayError(
        'upstream_bad_response',
        'The upstream provider sent a reply that cannot be translated',
      );
    }
  }

  function vars(ctx: RequestContext): TemplateVars {
    return {
      model: ctx.model ?? '',
      modelMapped: ctx.upstreamModel ?? ctx.model ?? '',
      requestId: ctx.id,
      api: ctx.api,
      provider: deps.provider,
    };
  }

  let warnedNoKey = false;
  function applyAuth(ctx: RequestContext, req: UpstreamRequest): void {
    for (const op of rule.auth) {
      if (op.op === 'auth_none') continue;
      if (deps.keys.length === 0) {
        if (!warnedNoKey) {
          warnedNoKey = true;
          ctx.log.warn(
            { provider: deps.provider, variable: providerKeyEnvName(deps.provider) },
            'provider has no upstream API key: set the variable or add the provider to the keys file',
          );
        }
        throw new GatewayError(
          'provider_key_missing',
          `The provider '${deps.provider}' is not available: the gateway has no upstream key for it`,
        );
      }
      const key = deps.keys[keyCursor++ % deps.keys.length]!;
      ctx.channel = key.name;
      if (op.op === 'auth_bearer') req.headers.authorization = `Bearer ${key.value}`;
      else if (op.op === 'auth_header_key') req.headers[op.header.toLowerCase()] = key.value;
      else req.query.set(op.param, key.value);
    }
  }

  function streamStepsFor(ctx: RequestContext): StreamStep[] {
    const s = state(ctx);
    if (s.steps === undefined) {
      s.steps = streamSteps.map((name): StreamStep => {
        if (deps.translators.has(name)) {
          const t = translator(ctx, name);
          return { event: (e, d) => t.streamEvent(e, d), end: (complete) => t.streamEnd(complete) };
        }
        const tr: StreamTransform = deps.transforms.get(name)!.create(ctx);
        return { event: (e, d) => tr.event(e, d), end: () => tr.end() };
      });
    }
    return s.steps;
  }

  const hook: Hook = {
    name: `rule:${deps.provider}:${rule.api}${rule.stream === undefined ? '' : `:stream=${rule.stream}`}`,
    responseMode: transformsResponse ? 'transform' : 'observe',
    rewriteBody(ctx: RequestContext, req: UpstreamRequest): UpstreamRequest {
      applyAuth(ctx, req);
      let body = req.body;
      const v = vars(ctx);
      for (const op of requestOps) {
        switch (op.op) {
          case 'set_header': {
            const value = renderHeaderTemplate(op.value, v);
            if (value === undefined) {
              throw new GatewayError(
                'invalid_parameter',
                `A value of this request cannot go into the upstream header ${op.name}: it has a control character`,
              );
            }
            req.headers[op.name.toLowerCase()] = value;
            break;
          }
          case 'pass_header': {
            const value = ctx.headers[op.name.toLowerCase()];
            if (value !== undefined)
              req.headers[op.name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value;
            break;
          }
          case 'del_header':
            delete req.headers[op.name.toLowerCase()];
            break;
          case 'json_set':
            if (isJsonObject(body)) {
              const value = isTemplate(op.value) ? renderTemplate(op.value, v) : op.value;
              body = jsonSetCopy(body, op.path, value);
            }
            break;
          case 'json_del':
            if (isJsonObject(body)) body = jsonDeleteCopy(body, op.path);
            break;
          case 'req_map':
            if (isJsonObject(body)) {
              try {
                body = translator(ctx, op.translator).request(body);
              } catch (err) {
                if (err instanceof TranslationError) {
                  throw new GatewayError('translation_failed', err.message, err.field);
                }
                throw err;
              }
            }
            break;
        }
      }
      req.body = body;
      for (const op of rule.upstream) {
        if (op.op === 'set_path') req.path = joinPath(pathPrefix, renderTemplate(op.value, v, 'path'));
        else if (op.op === 'set_query') req.query.set(op.name, renderTemplate(op.value, v));
        else req.query.delete(op.name);
      }
      return req;
    },
  };

  if (transformsResponse) {
    hook.onResponseHead = (ctx, head) => {
      if (ctx.status < 400 || errorMapper !== undefined) {
        const isStream = head.headers['content-type']?.startsWith('text/event-stream') === true;
        if (isStream ? streamSteps.length > 0 : jsonMappers.length > 0) {
          head.headers['content-type'] = isStream ? 'text/event-stream; charset=utf-8' : 'application/json';
        }
      }
      return head;
    };
    hook.onResponseChunk = (ctx, parts) => {
      const out: ResponsePart[] = [];
      for (const part of parts) {
        if (part.type === 'json') {
          let value = part.value;
          if (ctx.status >= 400) {
            if (errorMapper !== undefined) value = translator(ctx, errorMapper).error(ctx.status, value);
          } else {
            for (const name of jsonMappers) value = mapReply(ctx, name, value);
          }
          out.push({ type: 'json', value });
          continue;
        }
        const steps = streamStepsFor(ctx);
        if (steps.length === 1) {
          // The common case (one transform): no intermediate arrays, and an event passed on unchanged
          // keeps its part object, which keeps per-event garbage down on busy streams.
          for (const ev of steps[0]!.event(part.event, part.data)) {
            out.push(
              ev.data === part.data && ev.event === part.event
                ? part
                : { type: 'event', event: ev.event, data: ev.data },
            );
          }
          continue;
        }
        let events: { event?: string | undefined; data: string }[] = [{ event: part.event, data: part.data }];
        for (const step of steps) {
          const next: { event?: string | undefined; data: string }[] = [];
          for (const ev of events) next.push(...step.event(ev.event, ev.data));
          events = next;
          if (events.length === 0) break;
        }
        for (const ev of events) out.push({ type: 'event', event: ev.event, data: ev.data });
      }
      return out;
    };
    hook.onResponseEnd = (ctx) => {
      if (!ctx.stream || streamSteps.length === 0 || state(ctx).steps === undefined) return [];
      const steps = state(ctx).steps!;
      const complete = ctx.error === undefined;
      const out: ResponsePart[] = [];
      // Each step's trailing events pass through the steps after it.
      for (let i = 0; i < steps.length; i++) {
        let events = steps[i]!.end(complete);
        for (let j = i + 1; j < steps.length && events.length > 0; j++) {
          const next: { event?: string | undefined; data: string }[] = [];
          for (const ev of events) next.push(...steps[j]!.event(ev.event, ev.data));
          events = next;
        }
        for (const ev of events) out.push({ type: 'event', event: ev.event, data: ev.data });
      }
      return out;
    };
  }
  return hook;
}

function isJsonObject(v: unknown): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !Buffer.isBuffer(v);
}

function isTemplate(v: unknown): v is CompiledTemplate {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && 'parts' in v && 'source' in v;
}

function joinPath(prefix: string, path: string): string {
  if (prefix === '') return path;
  return prefix + (path.startsWith('/') ? path : `/${path}`);
}

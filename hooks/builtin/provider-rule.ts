// The DSL at request time: one hook per compiled match rule, built once per configuration load. It
// rewrites the upstream request (auth, headers, JSON ops, translator request mapping, path and query)
// and, when the rule maps responses, transforms JSON replies and stream events through the rule's
// translators and transforms. Rules that only pass responses through get no response methods at all,
// so the proxy can forward upstream bytes untouched.

import { splitBaseUrl } from '../../common/base-url.ts';
import type { UpstreamKey } from '../../common/config-types.ts';
import { GatewayError } from '../../common/errors.ts';
import { providerKeyEnvName } from '../../common/provider-key-env.ts';
import {
  type Hook,
  type JsonObject,
  REALTIME_APIS,
  type RequestContext,
  type ResponsePart,
  type UpstreamRequest,
} from '../../common/types.ts';
import { jsonDeleteCopy, jsonSetCopy } from '../dsl/json-path.ts';
import { type ProviderSettings, renderHeaderTemplate, renderTemplate } from '../dsl/template.ts';
import type { CompiledRule, CompiledTemplate } from '../dsl/types.ts';
import { framingOf, upstreamErrorStatus } from '../families/index.ts';
import type { StreamTransformFactory } from '../transforms/types.ts';
import { TranslationError, type TranslatorFactory } from '../translators/types.ts';
import { RuleTranslators, type StreamEvent } from './rule-translators.ts';

type TemplateVars = Parameters<typeof renderTemplate>[1];

export interface RuleHookDeps {
  readonly provider: string;
  readonly translators: ReadonlyMap<string, TranslatorFactory>;
  readonly transforms: ReadonlyMap<string, StreamTransformFactory>;
  /** Upstream keys of this provider (round robin); empty when none is configured. */
  readonly keys: readonly UpstreamKey[];
  /**
   * The rule's cloud credential (hooks/credentials), applied after every rewrite: the rule's key
   * directives then are not applied. Undefined: they are.
   */
  readonly cloudAuth?: boolean;
  /** `${provider.region}`, `${provider.project}`, `${provider.location}`. */
  readonly settings?: ProviderSettings;
  /** Its credentials or settings are set but unusable (logged at load): every request is refused. */
  readonly unavailable?: boolean;
}

export function createRuleHook(rule: CompiledRule, deps: RuleHookDeps): Hook {
  // A base_url may carry a path prefix (a corporate proxy, Azure resources): set_path paths go below it.
  const pathPrefix = splitBaseUrl(rule.upstreamConfig.baseUrl).prefix;

  const jsonMappers = rule.response.filter((op) => op.op === 'resp_map').map((op) => op.translator);
  const streamSteps = rule.response.filter((op) => op.op === 'sse_parse').map((op) => op.transform);
  const transformsResponse = jsonMappers.length > 0 || streamSteps.length > 0;
  // The translator that shapes error bodies: the rule's first resp_map, else its first translating
  // sse_parse (a streaming rule's errors arrive as JSON and must reach the client in its own shape).
  const errorMapper = jsonMappers[0] ?? streamSteps.find((name) => deps.translators.has(name));
  const errorFormat = errorMapper === undefined ? undefined : deps.translators.get(errorMapper)?.to;
  const errorStatus = errorFormat === undefined ? undefined : upstreamErrorStatus(errorFormat);

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

  const translators = new RuleTranslators(deps.translators, deps.transforms, streamSteps);
  const hook: Hook = {
    name: `rule:${deps.provider}:${rule.api}${rule.stream === undefined ? '' : `:stream=${rule.stream}`}`,
    responseMode: transformsResponse ? 'transform' : 'observe',
    rewriteBody: requestRewriter(rule, deps, requestOps, pathPrefix, translators),
  };
  if (transformsResponse) {
    hook.onResponseHead = responseHeadRewriter(jsonMappers, streamSteps, errorMapper, errorStatus);
    hook.onResponseChunk = responseChunkMapper(translators, jsonMappers, errorMapper);
    hook.onResponseEnd = responseEndMapper(translators, streamSteps);
  }
  return hook;
}

/** The rule's rewrite of the upstream request: auth, headers, JSON ops, req_map, then path and query. */
function requestRewriter(
  rule: CompiledRule,
  deps: RuleHookDeps,
  requestOps: CompiledRule['request'],
  pathPrefix: string,
  translators: RuleTranslators,
): (ctx: RequestContext, req: UpstreamRequest) => UpstreamRequest {
  const applyAuth = authApplier(rule, deps);
  return (ctx, req) => {
    applyAuth(ctx, req);
    translators.forgetServed(ctx);
    let body = req.body;
    const v: TemplateVars = {
      model: ctx.model ?? '',
      modelMapped: ctx.upstreamModel ?? ctx.model ?? '',
      requestId: ctx.id,
      api: ctx.api,
      provider: deps.provider,
      settings: deps.settings,
    };
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
              body = translators.mapRequest(ctx, op.translator, body);
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
  };
}

/** The rule's auth ops, with the provider's keys taken in turn (round robin across requests). */
function authApplier(
  rule: CompiledRule,
  deps: RuleHookDeps,
): (ctx: RequestContext, req: UpstreamRequest) => void {
  let keyCursor = 0;
  let warnedNoKey = false;
  if (deps.unavailable === true) {
    return () => {
      throw new GatewayError(
        'provider_key_missing',
        `The provider '${deps.provider}' is not available: its credentials or settings are incomplete`,
      );
    };
  }
  if (deps.cloudAuth === true) return () => undefined;
  return (ctx, req) => {
    for (const op of rule.auth) {
      if (op.op === 'auth_none') continue;
      if (op.op === 'auth_sigv4' || op.op === 'auth_google' || op.op === 'auth_entra') {
        // Not configured: the key directives of the block are the fallback; without any, no credential.
        if (
          rule.auth.some(
            (o) => o.op === 'auth_bearer' || o.op === 'auth_header_key' || o.op === 'auth_query_key',
          )
        )
          continue;
        throw new GatewayError(
          'provider_key_missing',
          `The provider '${deps.provider}' is not available: the gateway has no credentials for it`,
        );
      }
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
  };
}

function responseHeadRewriter(
  jsonMappers: readonly string[],
  streamSteps: readonly string[],
  errorMapper: string | undefined,
  errorStatus: ((status: number, headers: Readonly<Record<string, string>>) => number) | undefined,
): NonNullable<Hook['onResponseHead']> {
  return (ctx, head) => {
    if (ctx.status >= 400 && errorStatus !== undefined) {
      // The status the upstream's error name stands for; the error mapping below reads it.
      head.status = errorStatus(ctx.status, head.headers);
      ctx.status = head.status;
    }
    if (ctx.status < 400 || errorMapper !== undefined) {
      const contentType = head.headers['content-type'] ?? '';
      // A binary event stream keeps its type: the relay picks its framing by it and answers SSE.
      if (ctx.status < 400 && framingOf(contentType) !== undefined) return head;
      const isStream = contentType.startsWith('text/event-stream');
      if (isStream ? streamSteps.length > 0 : jsonMappers.length > 0) {
        head.headers['content-type'] = isStream ? 'text/event-stream; charset=utf-8' : 'application/json';
      }
    }
    return head;
  };
}

function responseChunkMapper(
  translators: RuleTranslators,
  jsonMappers: readonly string[],
  errorMapper: string | undefined,
): NonNullable<Hook['onResponseChunk']> {
  return (ctx, parts) => {
    const out: ResponsePart[] = [];
    for (const part of parts) {
      if (part.type === 'json') {
        let value = part.value;
        if (ctx.status >= 400) {
          if (errorMapper !== undefined)
            value = translators.translator(ctx, errorMapper).error(ctx.status, value);
        } else {
          for (const name of jsonMappers) value = translators.mapReply(ctx, name, value);
        }
        out.push({ type: 'json', value });
        continue;
      }
      const steps = translators.streamStepsFor(ctx);
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
      let events: StreamEvent[] = [{ event: part.event, data: part.data }];
      for (const step of steps) {
        const next: StreamEvent[] = [];
        for (const ev of events) next.push(...step.event(ev.event, ev.data));
        events = next;
        if (events.length === 0) break;
      }
      for (const ev of events) out.push({ type: 'event', event: ev.event, data: ev.data });
    }
    return out;
  };
}

function responseEndMapper(
  translators: RuleTranslators,
  streamSteps: readonly string[],
): NonNullable<Hook['onResponseEnd']> {
  return (ctx) => {
    if (!ctx.stream || streamSteps.length === 0 || translators.state(ctx).steps === undefined) return [];
    const steps = translators.state(ctx).steps!;
    const complete = ctx.error === undefined;
    const out: ResponsePart[] = [];
    // Each step's trailing events pass through the steps after it.
    for (let i = 0; i < steps.length; i++) {
      let events = steps[i]!.end(complete);
      for (let j = i + 1; j < steps.length && events.length > 0; j++) {
        const next: StreamEvent[] = [];
        for (const ev of events) next.push(...steps[j]!.event(ev.event, ev.data));
        events = next;
      }
      for (const ev of events) out.push({ type: 'event', event: ev.event, data: ev.data });
    }
    return out;
  };
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

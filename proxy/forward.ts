// Sending a request upstream: the candidates in order, each rule's request ops, and the retry rule
// (another candidate after a refusal or a connection failure, never after a reply has started).

import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { splitBaseUrl } from '../common/base-url.ts';
import { errorText, GatewayError, toGatewayError } from '../common/errors.ts';
import type { RequestContext, UpstreamRequest } from '../common/types.ts';
import type { CompiledRule } from '../hooks/dsl/types.ts';
import { FORWARDED_REQUEST_HEADERS, tokenCountOf, upstreamQuery } from '../hooks/families/index.ts';
import { askEarlyCount, type EarlyCount } from './early-count.ts';
import { answerCountLocally } from './local-count.ts';
import { runRewriteBody, runSelectTarget } from './pipeline.ts';
import { countAtProvider } from './provider-count.ts';
import { relay } from './relay.ts';
import type { RequestCompletion } from './request-completion.ts';
import type { Context } from './request-context.ts';
import type { Runtime } from './runtime.ts';
import { classifyUpstreamError, type UpstreamResponse, upstreamFailure } from './upstream.ts';

/** Pick a target, call it (retrying on the next candidate while nothing was sent) and relay the reply. */
export async function forward(
  rt: Runtime,
  ctx: Context,
  res: ServerResponse,
  completion: RequestCompletion,
): Promise<void> {
  const choice = await runSelectTarget(rt.requestHooks, ctx);
  if (choice === undefined || choice.candidates.length === 0) throw new GatewayError('provider_not_selected');
  const attempts = Math.min(choice.candidates.length, rt.config.limits.maxRetries + 1);
  let lastError: unknown;
  for (let i = 0; i < attempts; i++) {
    const candidate = choice.candidates[i]!;
    const provider = rt.providers.get(candidate.provider);
    if (provider === undefined) {
      lastError = new GatewayError('unknown_provider', `Unknown provider '${candidate.provider}'`);
      continue;
    }
    const rule = rt.matchRule(provider, ctx.api, ctx.stream, candidate.upstreamModel ?? ctx.model);
    const count = rule === undefined ? tokenCountOf(ctx.api) : undefined;
    if (count !== undefined) {
      ctx.upstreamModel = candidate.upstreamModel;
      // The provider's generation rule says how it would read the body (its req_map), so the count
      // is framed as that provider frames it.
      const generation = rt.matchRule(
        provider,
        count.countedApi,
        false,
        candidate.upstreamModel ?? ctx.model,
      );
      if (!(await countAtProvider(rt, ctx, res, count, provider, generation))) {
        await answerCountLocally(ctx, res, count, candidate.provider, generation);
      }
      return;
    }
    if (rule === undefined) {
      if (i === 0) {
        throw new GatewayError(
          'no_matching_rule',
          `The provider '${candidate.provider}' has no rule for api '${ctx.api}' with stream=${ctx.stream}`,
        );
      }
      continue;
    }
    ctx.provider = candidate.provider;
    ctx.upstreamModel = candidate.upstreamModel;
    const hooks = rt.ruleHooks(candidate.provider, rule);
    const upstreamReq = await runRewriteBody(hooks.rewrite, ctx, baseRequest(ctx, rule));
    // Last, so that a signature covers the request as sent.
    if (hooks.authorizer !== undefined) {
      try {
        const pending = hooks.authorizer.authorize(ctx, upstreamReq);
        if (pending !== undefined) await pending;
      } catch (err) {
        // A refused or unreachable token endpoint is this provider's: the next candidate may serve.
        lastError = toGatewayError(err);
        if (i === attempts - 1) throw lastError;
        continue;
      }
      ctx.channel = hooks.authorizer.channel;
    }
    const trace = ctx.trace;
    const t0 = performance.now();
    trace?.attempt(ctx, candidate.provider, upstreamReq, t0);
    const last = i === attempts - 1;
    let upstreamRes: UpstreamResponse;
    let early: EarlyCount | undefined;
    try {
      const sending = rt.upstream.send(upstreamReq, hooks.timeouts, ctx.cancellation);
      // An Anthropic client's translated stream: the provider's count of the input, asked alongside
      // (after the generation is on its way: preparing the count takes a translation of the body).
      early = askEarlyCount(rt, ctx, provider, rule);
      upstreamRes = await sending;
    } catch (err) {
      early?.cancel();
      if (ctx.clientAborted) {
        completion.useRule(hooks);
        return;
      }
      lastError = classifyUpstreamError(err);
      trace?.attemptFailed(lastError instanceof GatewayError ? lastError.code : 'upstream_unreachable');
      // Where it went and what the transport said, for the operator; the client's error names neither.
      ctx.log.warn(
        {
          provider: candidate.provider,
          ...upstreamFailure(err, upstreamReq.origin),
          err: errorText(lastError),
          attempt: i + 1,
        },
        'upstream call failed',
      );
      if (last) throw lastError;
      continue;
    }
    ctx.upstreamTtfbMs = performance.now() - t0;
    const status = upstreamRes.statusCode;
    if (early !== undefined && (status < 200 || status >= 300)) early.cancel();
    if (status === 401 || status === 403) {
      // The upstream refused the operator's key, not the client's: its text (which may quote the key)
      // stays in the gateway's log, and the client learns the provider is misconfigured.
      ctx.log.warn(
        {
          provider: candidate.provider,
          status,
          reason: await upstreamErrorReason(upstreamRes),
          attempt: i + 1,
        },
        "upstream refused the gateway's credentials",
      );
      hooks.authorizer?.refused?.();
      lastError = new GatewayError(
        'upstream_auth_failed',
        `The provider '${candidate.provider}' refused the gateway's credentials; the operator must check the provider key`,
      );
      trace?.attemptFailed('upstream_auth_failed', status);
      if (last) throw lastError;
      continue;
    }
    if ((status === 429 || status >= 500) && !last) {
      ctx.log.warn(
        { provider: candidate.provider, status, attempt: i + 1 },
        'upstream refused; trying the next provider',
      );
      await upstreamRes.body.dump().catch(() => undefined);
      trace?.attemptFailed(String(status), status);
      continue;
    }
    completion.useRule(hooks);
    // A count the provider made (forwarded, maybe translated), as opposed to the gateway's estimate.
    if (status < 300 && tokenCountOf(ctx.api) !== undefined)
      res.setHeader('x-router-token-count', 'provider');
    // The stream's first event states the count: it waits for it (bounded by limits.early_count_wait_ms).
    if (early !== undefined) await early.ready();
    await relay(ctx, hooks, upstreamRes, res, rt.metrics.activeStreams, completion);
    return;
  }
  throw lastError ?? new GatewayError('provider_not_selected');
}

/** The error type or code of an upstream error body (never its message, which may quote the key). */
async function upstreamErrorReason(up: UpstreamResponse): Promise<string | undefined> {
  let raw: Buffer;
  try {
    raw = await up.body.readAll(64 * 1024);
  } catch {
    return undefined;
  }
  try {
    const body = JSON.parse(raw.toString('utf8')) as { error?: Record<string, unknown> } | null;
    const error = body?.error;
    if (error === null || typeof error !== 'object') return undefined;
    for (const field of ['code', 'type', 'status']) {
      const value = error[field];
      if (typeof value === 'string' && value.length <= 64) return value;
    }
  } catch {
    // not JSON: no reason to report
  }
  return undefined;
}

/** The request as it would go upstream before any rule op: same path below the base URL's prefix. */
function baseRequest(ctx: RequestContext, rule: CompiledRule): UpstreamRequest {
  const { origin, prefix } = splitBaseUrl(rule.upstreamConfig.baseUrl);
  const headers: Record<string, string> = { 'accept-encoding': 'identity' };
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = ctx.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  let body: UpstreamRequest['body'];
  if (ctx.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = ctx.body;
    // The registry's upstream model name replaces the client's (copy: the original stays for billing).
    if (
      typeof body.model === 'string' &&
      ctx.upstreamModel !== undefined &&
      ctx.upstreamModel !== body.model
    ) {
      body = { ...body, model: ctx.upstreamModel };
    }
  } else {
    headers['content-type'] = ctx.headers['content-type'] ?? 'application/octet-stream';
    body = ctx.rawBody.length > 0 ? ctx.rawBody : undefined;
  }
  // The client's query never reaches the upstream: it could carry the client's own key or steer the
  // upstream API; the rule's set_query ops add what the provider needs.
  const query = new URLSearchParams();
  // What the client's own wire format needs upstream (Gemini's alt=sse), only when the upstream speaks
  // that format: a rule that maps the request talks to another one.
  const translated = rule.request.some((op) => op.op === 'req_map');
  const needed = translated ? undefined : upstreamQuery(ctx.api);
  if (needed !== undefined) for (const [name, value] of Object.entries(needed)) query.set(name, value);
  return { method: ctx.method, origin, path: prefix + ctx.path, query, headers, body };
}

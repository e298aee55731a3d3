// A count the serving provider answers although it has no counting endpoint for the client's family:
// an OpenAI-served model has no count_tokens or countTokens, but OpenAI counts Responses bodies. The
// client's body goes through the provider's generation translator to the pivot (chat), then through the
// counting family's request translation (TokenCount.fromPivot), to the provider's rule for that counting
// api; the provider's number comes back in the client's shape with `x-router-token-count: provider`.
// When the provider cannot be asked or fails, the caller counts locally (proxy/local-count.ts).

import type { ServerResponse } from 'node:http';
import { splitBaseUrl } from '../common/base-url.ts';
import { errorText } from '../common/errors.ts';
import type { JsonValue, RequestContext, UpstreamRequest } from '../common/types.ts';
import type { CompiledProvider, CompiledRule } from '../hooks/dsl/types.ts';
import { DEFAULT_FAMILY, pivotTokenCounts, requestTextOf } from '../hooks/families/index.ts';
import type { TokenCount } from '../hooks/families/types.ts';
import { servedBody } from './local-count.ts';
import { runRewriteBody } from './pipeline.ts';
import type { Context } from './request-context.ts';
import type { Runtime } from './runtime.ts';
import { identify, sendJson } from './send.ts';
import type { Cancellation } from './upstream.ts';

/** A counting reply is one small JSON object. */
const MAX_REPLY_BYTES = 64 * 1024;

/** Asks the provider through the pivot; false when it has no such endpoint or did not answer a count. */
export async function countAtProvider(
  rt: Runtime,
  ctx: Context,
  res: ServerResponse,
  count: TokenCount,
  provider: CompiledProvider,
  generation: CompiledRule | undefined,
): Promise<boolean> {
  if (ctx.body === undefined) return false;
  const model = ctx.upstreamModel ?? ctx.model;
  const target = pivotCountRule(rt, provider, model);
  if (target === undefined) return false;
  const body = count.generationBody?.(ctx.body) ?? ctx.body;
  const served = servedBody(ctx, body, requestTextOf(ctx.clientFormat, count.countedApi), generation);
  if (served.format !== DEFAULT_FAMILY.name) return false;
  const tokens = await askProviderCount(
    rt,
    ctx,
    provider.name,
    target.rule,
    target.count.fromPivot!(served.body, model),
    ctx.cancellation,
  );
  const reply = tokens === undefined ? undefined : target.count.read(tokens);
  if (reply === undefined) return false;
  // A provider served it: the completion counts it as a count that is not billable.
  ctx.provider = provider.name;
  ctx.status = 200;
  identify(res, ctx.id, ctx.correlationId);
  res.setHeader('x-router-token-count', 'provider');
  sendJson(res, 200, count.reply(reply));
  return true;
}

/** The provider's counting endpoint that takes a completion-style body (OpenAI's input_tokens), if any. */
export function pivotCountRule(
  rt: Runtime,
  provider: CompiledProvider,
  model: string | undefined,
): { count: TokenCount; rule: CompiledRule } | undefined {
  for (const count of pivotTokenCounts()) {
    const rule = rt.matchRule(provider, count.api, false, model);
    if (rule !== undefined) return { count, rule };
  }
  return undefined;
}

/**
 * The provider's JSON answer to a counting request sent by `rule` (its rewrite and credential, so the
 * route and signature are the generation's own), or undefined (logged) when it gave none. A call
 * cancelled through `cancel` is not logged here: the caller says why it stopped waiting.
 */
export async function askProviderCount(
  rt: Runtime,
  ctx: RequestContext,
  provider: string,
  rule: CompiledRule,
  body: UpstreamRequest['body'],
  cancel: Cancellation,
): Promise<JsonValue | undefined> {
  const hooks = rt.ruleHooks(provider, rule);
  const { origin, prefix } = splitBaseUrl(rule.upstreamConfig.baseUrl);
  const base: UpstreamRequest = {
    method: 'POST',
    origin,
    path: prefix,
    query: new URLSearchParams(),
    headers: { 'accept-encoding': 'identity', 'content-type': 'application/json' },
    body,
  };
  try {
    const req = await runRewriteBody(hooks.rewrite, ctx, base);
    if (hooks.authorizer !== undefined) await hooks.authorizer.authorize(ctx, req);
    const reply = await rt.upstream.send(req, hooks.timeouts, cancel);
    if (reply.statusCode < 200 || reply.statusCode >= 300) {
      await reply.body.dump().catch(() => undefined);
      ctx.log.warn({ provider, status: reply.statusCode }, 'provider count failed; counting locally');
      return undefined;
    }
    return JSON.parse((await reply.body.readAll(MAX_REPLY_BYTES)).toString('utf8')) as JsonValue;
  } catch (err) {
    if (!cancel.cancelled)
      ctx.log.warn({ provider, err: errorText(err) }, 'provider count failed; counting locally');
    return undefined;
  }
}

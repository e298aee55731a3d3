// Token counting for a provider without a counting endpoint: the gateway answers from its own bounded
// estimator (the model's own tokenizer for OpenAI models, an approximation otherwise; docs/translation.md
// "Counting tokens"). The body is counted as the provider would read it: translated by the provider's
// generation rule and framed by the provider's family (tools by its published rules). Input it cannot
// count (images, files, audio) is answered with an error, never a made-up number, so the client falls
// back to its own estimate.

import type { ServerResponse } from 'node:http';
import { GatewayError } from '../common/errors.ts';
import type { JsonObject, RequestContext } from '../common/types.ts';
import type { CompiledRule } from '../hooks/dsl/types.ts';
import { generationTextOf, requestTextOf, TRANSLATORS } from '../hooks/families/index.ts';
import type { TokenCount } from '../hooks/families/types.ts';
import { TranslationError } from '../hooks/translators/types.ts';
import { estimateUsageInSlices, textOnlyInput } from '../hooks/usage/estimate.ts';
import type { RequestText } from '../hooks/usage/types.ts';
import { identify, sendJson } from './send.ts';

export interface ServedBody {
  body: JsonObject;
  requestText: RequestText;
  /** The wire format of `body`: the provider's when the rule translates, else the client's. */
  format: string;
}

/** The body as the provider's generation rule would send it, and where that body holds text. */
export function servedBody(
  ctx: RequestContext,
  body: JsonObject,
  clientText: RequestText,
  generation: CompiledRule | undefined,
): ServedBody {
  const op = generation?.request.find((o) => o.op === 'req_map');
  const factory = op?.op === 'req_map' ? TRANSLATORS.get(op.translator) : undefined;
  const requestText = factory === undefined ? undefined : generationTextOf(factory.to);
  if (factory === undefined || requestText === undefined) {
    return { body, requestText: clientText, format: ctx.clientFormat };
  }
  const translator = factory.create({
    requestId: ctx.id,
    model: ctx.model,
    upstreamModel: ctx.upstreamModel,
    stream: false,
    createdAt: Math.floor(ctx.receivedAt / 1000),
    headers: ctx.headers,
  });
  try {
    return { body: translator.request({ ...body, stream: false }), requestText, format: factory.to };
  } catch (err) {
    // The generation would be refused the same way; so is its count, as a forwarded count is.
    if (err instanceof TranslationError) throw new GatewayError('translation_failed', err.message, err.field);
    throw err;
  }
}

export async function answerCountLocally(
  ctx: RequestContext,
  res: ServerResponse,
  count: TokenCount,
  provider: string,
  generation?: CompiledRule,
): Promise<void> {
  const body = ctx.body === undefined ? undefined : (count.generationBody?.(ctx.body) ?? ctx.body);
  const clientText = requestTextOf(ctx.clientFormat, count.countedApi);
  if (body === undefined || !textOnlyInput(body, clientText)) {
    throw new GatewayError(
      'count_unavailable',
      `The provider '${provider}' has no token counting the gateway can reach, and the request holds media the gateway cannot count`,
    );
  }
  const served = servedBody(ctx, body, clientText, generation);
  // In slices, like the metering estimate: a huge prompt never holds the event loop for long.
  const usage = await estimateUsageInSlices({
    model: ctx.upstreamModel ?? ctx.model ?? '',
    requestText: served.requestText,
    requestBody: served.body,
    outputText: '',
  });
  const tokens = usage.inputTokens;
  ctx.status = 200;
  identify(res, ctx.id, ctx.correlationId);
  res.setHeader('x-router-token-count', 'estimated');
  sendJson(res, 200, count.reply(tokens));
}

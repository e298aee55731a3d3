// Token counting for a provider without a counting endpoint: the gateway answers from its own bounded
// estimator (the model's own tokenizer for OpenAI models, an approximation otherwise; docs/translation.md
// "Counting tokens"). Input it cannot count (images, files, audio) is answered with an error, never a
// made-up number, so the client falls back to its own estimate.

import type { ServerResponse } from 'node:http';
import { GatewayError } from '../common/errors.ts';
import type { RequestContext } from '../common/types.ts';
import { requestTextOf } from '../hooks/families/index.ts';
import type { TokenCount } from '../hooks/families/types.ts';
import { estimateUsageInSlices, textOnlyInput } from '../hooks/usage/estimate.ts';
import { sendJson } from './send.ts';

export async function answerCountLocally(
  ctx: RequestContext,
  res: ServerResponse,
  count: TokenCount,
  provider: string,
): Promise<void> {
  const body = ctx.body === undefined ? undefined : (count.generationBody?.(ctx.body) ?? ctx.body);
  const requestText = requestTextOf(ctx.clientFormat, count.countedApi);
  if (body === undefined || !textOnlyInput(body, requestText)) {
    throw new GatewayError(
      'count_unavailable',
      `The provider '${provider}' has no token counting the gateway can reach, and the request holds media the gateway cannot count`,
    );
  }
  // In slices, like the metering estimate: a huge prompt never holds the event loop for long.
  const usage = await estimateUsageInSlices({
    model: ctx.upstreamModel ?? ctx.model ?? '',
    requestText,
    requestBody: body,
    outputText: '',
  });
  const tokens = usage.inputTokens;
  ctx.status = 200;
  res.setHeader('x-router-request-id', ctx.id);
  res.setHeader('x-router-token-count', 'estimated');
  sendJson(res, 200, count.reply(tokens));
}

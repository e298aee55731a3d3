// What the gateway knows about usage when the reply is over: the upstream's own counts when a preset
// read them, otherwise an estimate from the request and the output that actually reached the client
// (spec 1.5: usage is estimated when the upstream returns none; an aborted stream is billed for what
// was delivered).

import type { JsonValue, RequestContext, Usage } from '../hooks/types.ts';

/** Most output text the gateway keeps per request for estimation; beyond it the estimate is capped. */
export const DELIVERED_TEXT_LIMIT = 1024 * 1024;

/** Remember a delivered event or body for estimation, bounded. */
export function recordDelivered(ctx: RequestContext, data: string, size: { bytes: number }): void {
  if (size.bytes >= DELIVERED_TEXT_LIMIT) return;
  size.bytes += data.length;
  ctx.deliveredText.push(data);
}

// Fields that carry generated text in the completion-style, Anthropic and Gemini shapes (deltas too).
const TEXT_KEYS = new Set(['content', 'text', 'arguments', 'partial_json', 'delta', 'refusal', 'thinking']);

function collectText(value: JsonValue, out: string[], key: string | undefined): void {
  if (typeof value === 'string') {
    if (key !== undefined && TEXT_KEYS.has(key)) out.push(value);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) collectText(item, out, key);
    return;
  }
  for (const k in value) {
    if (k === 'usage' || k === 'usageMetadata' || k === 'id') continue;
    collectText(value[k], out, k);
  }
}

/** The generated text inside delivered events / bodies (any of the three wire families). */
export function deliveredOutputText(delivered: readonly string[]): string {
  const out: string[] = [];
  for (const data of delivered) {
    if (data === '[DONE]') continue;
    try {
      collectText(JSON.parse(data) as JsonValue, out, undefined);
    } catch {
      // an event that is not JSON carries no countable text
    }
  }
  return out.join('');
}

export type Estimator = (input: {
  model: string;
  api: RequestContext['api'];
  requestBody: RequestContext['body'];
  outputText: string;
}) => Usage;

/**
 * Settle ctx.usage: keep upstream usage of a complete reply; estimate when there is none, or when the
 * client aborted a stream before the upstream's final counts (then input keeps the upstream figure
 * when it was reported, and output is what was delivered).
 */
export function settleUsage(ctx: RequestContext, estimate: Estimator): void {
  if (ctx.status >= 400 || ctx.status === 0) return;
  const partial = ctx.stream && (ctx.clientAborted || ctx.error !== undefined);
  if (ctx.usage !== undefined && !partial) return;
  const estimated = estimate({
    model: ctx.upstreamModel ?? ctx.model ?? '',
    api: ctx.api,
    requestBody: ctx.body,
    outputText: deliveredOutputText(ctx.deliveredText),
  });
  if (ctx.usage !== undefined && ctx.usage.inputTokens > 0) {
    const inputTokens = ctx.usage.inputTokens;
    const outputTokens = Math.max(ctx.usage.outputTokens, estimated.outputTokens);
    ctx.usage = { ...ctx.usage, inputTokens, outputTokens, totalTokens: inputTokens + outputTokens };
  } else {
    ctx.usage = estimated;
  }
  ctx.usageStage = 'estimated';
}

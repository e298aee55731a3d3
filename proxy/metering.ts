// What the gateway knows about usage when the reply is over: the upstream's own counts when a preset
// read them, otherwise an estimate from the request and the output that actually reached the client
// (usage is estimated when the upstream returns none; an aborted stream is billed for what was
// delivered). docs/billing.md "Where the counts come from" states the rule.

import type { JsonValue, RequestContext, StreamEndReason, Usage } from '../common/types.ts';
import { servedRequestOf } from '../hooks/builtin/rule-translators.ts';
import { streamFailed, streamUsage } from '../hooks/builtin/usage-meter.ts';
import {
  REPLY_TEXT_FIELDS,
  requestTextOf,
  STREAM_END_MARKERS,
  USAGE_FIELDS,
} from '../hooks/families/index.ts';
import { providerInputCount } from '../hooks/usage/early-input.ts';
import { runInSlices, runToEnd, type SliceBudget } from '../hooks/usage/token-slices.ts';
import type { RequestText, UsageSniffer } from '../hooks/usage/types.ts';

/** Most output text the gateway keeps per request for estimation; beyond it the estimate is capped. */
export const DELIVERED_TEXT_LIMIT = 1024 * 1024;

/** Remember a delivered event or body for estimation, bounded. */
export function recordDelivered(ctx: RequestContext, data: string, size: { bytes: number }): void {
  if (size.bytes >= DELIVERED_TEXT_LIMIT) return;
  size.bytes += data.length;
  ctx.deliveredText.push(data);
}

function collectText(value: JsonValue | undefined, out: string[], key: string | undefined): void {
  if (typeof value === 'string') {
    if (key !== undefined && REPLY_TEXT_FIELDS.has(key)) out.push(value);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) collectText(item, out, key);
    return;
  }
  for (const k in value) {
    if (k === 'id' || USAGE_FIELDS.has(k)) continue;
    collectText(value[k], out, k);
  }
}

function* outputTextSteps(delivered: readonly string[]): Generator<number, string, undefined> {
  const out: string[] = [];
  for (const data of delivered) {
    if (!STREAM_END_MARKERS.has(data)) {
      try {
        collectText(JSON.parse(data) as JsonValue, out, undefined);
      } catch {
        // an event that is not JSON carries no countable text
      }
    }
    yield data.length;
  }
  return out.join('');
}

/** The generated text inside delivered events / bodies (any wire family). */
export function deliveredOutputText(delivered: readonly string[]): string {
  return runToEnd(outputTextSteps(delivered));
}

/** Estimation steps (hooks/usage/estimate.ts estimateUsageSteps): each yields the characters it handled. */
export type Estimator = (input: {
  model: string;
  requestText: RequestText;
  requestBody: RequestContext['body'];
  outputText: string;
}) => Generator<number, Usage, undefined>;

/**
 * Settle ctx.usage and, for a stream, ctx.endReason. A reply whose upstream gave its final counts keeps
 * them. Otherwise usage is estimated (`estimated`): when there are no counts at all, or when a stream
 * ended without its final report (client gone, upstream failed, in-stream error, cut): then input is the
 * provider's own count when one had arrived (the stream's: Anthropic's message_start, Gemini's
 * promptTokenCount; else the count asked alongside the generation, proxy/early-count.ts) and output is
 * the larger of the upstream's running count and the estimate of what was delivered. A stream read on to
 * its end after its client left (finish_upstream) keeps its final counts.
 *
 * Returns undefined when settled now, or a promise when the estimate needs more than one slice
 * (hooks/usage/token-slices.ts): the caller must wait for it before reporting the usage.
 */
export function settleUsage(
  ctx: RequestContext,
  estimate: Estimator,
  budget?: SliceBudget,
): Promise<void> | undefined {
  if (ctx.status >= 400 || ctx.status === 0) return undefined;
  const running = ctx.stream ? streamUsage(ctx) : undefined;
  const reported = ctx.usage ?? running?.result();
  let partial = false;
  if (ctx.stream) {
    // The relay's mark: read on after the client left (finish_upstream), to the end or not.
    const readOn = ctx.endReason === 'client_gone';
    ctx.endReason = endReasonOf(ctx, running, readOn);
    partial = ctx.endReason !== undefined && !(readOn && ctx.endReason === 'client_gone');
  }
  if (reported !== undefined && !partial) {
    ctx.usage = reported;
    ctx.usageStage ??= 'upstream';
    return undefined;
  }
  const input =
    reported !== undefined && reported.inputTokens > 0 ? reported.inputTokens : providerInputCount(ctx);
  const estimated = runInSlices(estimateSteps(ctx, estimate, input !== undefined), budget);
  if (estimated instanceof Promise)
    return estimated.then((usage) => applyEstimate(ctx, reported, input, usage));
  applyEstimate(ctx, reported, input, estimated);
  return undefined;
}

/**
 * Why a stream ended before its final usage was read (docs/billing.md "Interrupted streams"), or
 * undefined when it was read to its end with it. A client that left counts unless the stream was read on
 * to its end and that end had the final usage.
 */
function endReasonOf(
  ctx: RequestContext,
  running: UsageSniffer | undefined,
  readOn: boolean,
): StreamEndReason | undefined {
  if (ctx.endReason === 'timeout') return 'timeout';
  if (ctx.clientAborted && !readOn) return 'client_gone';
  if (ctx.error !== undefined || streamFailed(ctx)) return 'upstream_error';
  if (running !== undefined && !running.final()) return 'upstream_cut';
  return readOn ? 'client_gone' : undefined;
}

function* estimateSteps(
  ctx: RequestContext,
  estimate: Estimator,
  inputKnown: boolean,
): Generator<number, Usage, undefined> {
  const outputText = yield* outputTextSteps(ctx.deliveredText);
  // The input as the serving provider reads it (translated, in its framing) when a rule translated it.
  const served = servedRequestOf(ctx);
  return yield* estimate({
    model: ctx.upstreamModel ?? ctx.model ?? '',
    requestText: served?.requestText ?? requestTextOf(ctx.clientFormat, ctx.api),
    requestBody: inputKnown ? undefined : (served?.body ?? ctx.body),
    outputText,
  });
}

/** `input`: the provider's count of the input when one arrived, which replaces the estimate's. */
function applyEstimate(
  ctx: RequestContext,
  reported: Usage | undefined,
  input: number | undefined,
  estimated: Usage,
): void {
  const inputTokens = input ?? estimated.inputTokens;
  const outputTokens = Math.max(reported?.outputTokens ?? 0, estimated.outputTokens);
  ctx.usage = {
    ...(reported ?? estimated),
    inputTokens,
    outputTokens,
    totalTokens: inputTokens + outputTokens,
  };
  ctx.usageStage = 'estimated';
}

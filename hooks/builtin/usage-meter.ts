// Usage sniffing (onResponseChunk, observe only): reads token counts from the upstream's reply with the
// rule's preset (`usage_extract`) or JSON paths (`usage_path`), without delaying or changing a byte. It
// sits first among the response hooks, so it sees the upstream's own format before any translator.

import { RequestState } from '../../common/request-state.ts';
import type { Hook, RequestContext, ResponseHead, ResponsePart, Usage } from '../../common/types.ts';
import type { CompiledRule } from '../dsl/types.ts';
import { mergeRequestUsage } from '../usage/request-usage.ts';
import { isStreamError } from '../usage/sniffers.ts';
import type { RequestUsage, UsagePreset, UsageSniffer } from '../usage/types.ts';

export interface UsageMeterDeps {
  readonly presets: ReadonlyMap<string, UsagePreset>;
  readonly pathExtractor: (
    paths: { field: import('../dsl/types.ts').UsageField; path: readonly (string | number)[] }[],
  ) => UsagePreset;
}

/** The preset a rule's metrics block names, or undefined when the rule meters nothing. */
export function rulePreset(rule: CompiledRule, deps: UsageMeterDeps): UsagePreset | undefined {
  const presetOp = rule.metrics.find((op) => op.op === 'usage_extract');
  if (presetOp !== undefined && presetOp.op === 'usage_extract') return deps.presets.get(presetOp.preset);
  const paths = rule.metrics.flatMap((op) =>
    op.op === 'usage_path' ? [{ field: op.field, path: op.path }] : [],
  );
  return paths.length > 0 ? deps.pathExtractor(paths) : undefined;
}

/** Each streamed request's sniffer, shared by the meter hooks so that settling can read it. */
const sniffers = new RequestState<UsageSniffer>();

/**
 * The stream's usage reader, also when onResponseEnd never ran (the client went away): its counts so
 * far and whether they are final.
 */
export function streamUsage(ctx: RequestContext): UsageSniffer | undefined {
  return sniffers.get(ctx);
}

/** Streams in which the upstream reported an error (set only then). */
const failures = new RequestState<true>();

/** Whether the upstream reported an error inside the stream (docs/billing.md "Interrupted streams"). */
export function streamFailed(ctx: RequestContext): boolean {
  return failures.get(ctx) === true;
}

/** Quantities a preset read from the request (fromRequest), merged under what the reply reports. */
const requested = new RequestState<RequestUsage>();

function reportUsage(ctx: RequestContext, usage: Usage): void {
  const asked = requested.get(ctx);
  ctx.usage = asked === undefined ? usage : mergeRequestUsage(asked, usage);
  ctx.usageStage = 'upstream';
}

export function createUsageMeterHook(preset: UsagePreset): Hook {
  const fromRequest = preset.fromRequest;
  return {
    name: `usage:${preset.name}`,
    responseMode: 'observe',
    // Set before the body: a reply that carries no usage (audio bytes, plain text) is still billed by
    // what the request asked for, and is not estimated in tokens.
    ...(fromRequest === undefined
      ? {}
      : {
          onResponseHead(ctx: RequestContext, head: ResponseHead): ResponseHead {
            if (head.status >= 400) return head;
            const asked = fromRequest({
              body: ctx.body,
              rawBody: ctx.rawBody,
              contentType: typeof ctx.headers['content-type'] === 'string' ? ctx.headers['content-type'] : '',
            });
            if (asked !== undefined) {
              requested.set(ctx, asked);
              ctx.usage = asked.usage;
              ctx.usageStage = asked.estimated === undefined ? 'upstream' : 'estimated';
            }
            return head;
          },
        }),
    onResponseChunk(ctx: RequestContext, parts: readonly ResponsePart[]): readonly ResponsePart[] {
      if (ctx.status >= 400) return parts;
      for (const part of parts) {
        if (part.type === 'json') {
          const usage = preset.fromJson(part.value);
          if (usage !== undefined) reportUsage(ctx, usage);
          continue;
        }
        let sniffer = sniffers.get(ctx);
        if (sniffer === undefined) {
          sniffer = preset.createSniffer();
          sniffers.set(ctx, sniffer);
        }
        sniffer.event(part.event, part.data);
        if (isStreamError(part.event, part.data)) failures.set(ctx, true);
      }
      return parts;
    },
    onResponseEnd(ctx: RequestContext): readonly ResponsePart[] {
      const usage = sniffers.get(ctx)?.result();
      if (usage !== undefined) reportUsage(ctx, usage);
      return [];
    },
  } satisfies Hook;
}

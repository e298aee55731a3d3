// The gateway asks OpenAI-compatible upstreams for usage on every stream (`stream_options.include_usage`)
// so it can meter; a client that did not ask must not see the extra usage-only chunk (`choices: []`),
// and the `usage: null` field the upstream then adds to every other chunk is left as the API sends it.

import { isObject } from '../../../common/json-guards.ts';
import type { JsonObject, RequestContext, SseOut } from '../../../common/types.ts';
import type { StreamTransform, StreamTransformFactory } from '../../transforms/types.ts';

const PASS: StreamTransform = {
  event: (event, data) => [{ event, data }],
  end: () => [],
};

function clientAskedForUsage(body: JsonObject | undefined): boolean {
  const opts = body?.stream_options;
  return isObject(opts) && opts.include_usage === true;
}

export const openaiUsageStrip = {
  name: 'openai_usage_strip',
  create(ctx: RequestContext): StreamTransform {
    if (clientAskedForUsage(ctx.body)) return PASS;
    return {
      event(event, data): SseOut[] {
        // Cheap test first: only the usage-only chunk has an empty choices array.
        if (!data.includes('"choices":[]') && !data.includes('"choices": []')) return [{ event, data }];
        try {
          const chunk = JSON.parse(data) as { choices?: unknown[]; usage?: unknown };
          if (Array.isArray(chunk.choices) && chunk.choices.length === 0 && chunk.usage) return [];
        } catch {
          // not JSON: pass it on untouched
        }
        return [{ event, data }];
      },
      end: () => [],
    };
  },
} satisfies StreamTransformFactory;

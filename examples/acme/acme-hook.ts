// Example of a provider that the DSL alone cannot express: "Acme" answers `POST /generate` with
// `{prompt, max_new_tokens}` -> `{output, usage: {in, out}}`. This hook maps a completion-style chat
// request to that shape and the reply back, and reports the usage it saw. docs/hooks.md walks through it;
// test/examples/acme.test.ts runs it against a small Acme server.

import type {
  Hook,
  JsonObject,
  JsonValue,
  RequestContext,
  ResponsePart,
  UpstreamRequest,
} from '../../common/types.ts';

interface AcmeReply {
  output?: unknown;
  usage?: { in?: unknown; out?: unknown };
}

function promptOf(body: JsonObject): string {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  return messages
    .map((m) =>
      m !== null && typeof m === 'object' && !Array.isArray(m) ? `${m.role}: ${String(m.content)}` : '',
    )
    .join('\n');
}

export function createHook(options: Readonly<Record<string, JsonValue>>): Hook {
  const defaultMax = typeof options.default_max_tokens === 'number' ? options.default_max_tokens : 256;
  return {
    name: 'acme',
    responseMode: 'transform',
    rewriteBody(ctx: RequestContext, req: UpstreamRequest): UpstreamRequest {
      const body = ctx.body ?? {};
      const max = typeof body.max_tokens === 'number' ? body.max_tokens : defaultMax;
      req.body = { prompt: promptOf(body), max_new_tokens: max };
      return req;
    },
    onResponseChunk(ctx: RequestContext, parts: readonly ResponsePart[]): readonly ResponsePart[] {
      return parts.map((part): ResponsePart => {
        if (part.type !== 'json' || ctx.status >= 400) return part;
        const reply = part.value as AcmeReply;
        const input = Number(reply.usage?.in ?? 0);
        const output = Number(reply.usage?.out ?? 0);
        ctx.usage = { inputTokens: input, outputTokens: output, totalTokens: input + output };
        ctx.usageStage = 'upstream';
        return {
          type: 'json',
          value: {
            id: `chatcmpl-${ctx.id}`,
            object: 'chat.completion',
            created: Math.floor(ctx.receivedAt / 1000),
            model: ctx.model ?? 'acme',
            choices: [
              {
                index: 0,
                message: { role: 'assistant', content: String(reply.output ?? '') },
                finish_reason: 'stop',
              },
            ],
            usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
          },
        };
      });
    },
  };
}

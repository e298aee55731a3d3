// The Anthropic Messages body as the clouds take it, the rewrite the official Bedrock and Vertex SDKs
// make: the model moves to the path (`model` removed), `anthropic_version` names the cloud's version,
// and on Bedrock the stream flag is the path's too and the `anthropic-beta` header becomes the
// `anthropic_beta` body field (Vertex takes the header as it is). Named in provider files as
// `req_map anthropic_to_bedrock_invoke;` (Anthropic clients; `resp_map` and `sse_parse` with the same
// name map Bedrock's error bodies) and, for the other families, `<client>_to_bedrock_invoke`: their
// translator to Anthropic followed by this rewrite.

import type { IncomingHttpHeaders } from 'node:http';
import { isObject } from '../../../common/json-guards.ts';
import type { JsonObject, JsonValue } from '../../../common/types.ts';
import { parseJsonObject, THROTTLED_CODE } from '../../translators/json.ts';
import type { Translator, TranslatorFactory, TranslatorInit } from '../../translators/types.ts';
import { googleThrottling } from '../gemini/errors.ts';
import { bedrockErrorAsAnthropic, throwIfThrottled } from './errors.ts';

export type AnthropicCloud = 'bedrock' | 'vertex';

export const ANTHROPIC_CLOUD_VERSION: Readonly<Record<AnthropicCloud, string>> = {
  bedrock: 'bedrock-2023-05-31',
  vertex: 'vertex-2023-10-16',
};

/** The upstream format of each cloud's Anthropic body (`<client>_to_<format>`). */
const FORMAT: Readonly<Record<AnthropicCloud, string>> = {
  bedrock: 'bedrock_invoke',
  vertex: 'vertex_anthropic',
};

function headerValue(headers: IncomingHttpHeaders | undefined, name: string): string | undefined {
  const value = headers?.[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/** An Anthropic Messages body rewritten for a cloud; a client's own version or betas field wins. */
export function cloudAnthropicBody(
  body: JsonObject,
  cloud: AnthropicCloud,
  headers?: IncomingHttpHeaders,
): JsonObject {
  const out: JsonObject = { ...body };
  delete out.model;
  if (typeof out.anthropic_version !== 'string') out.anthropic_version = ANTHROPIC_CLOUD_VERSION[cloud];
  if (cloud === 'bedrock') {
    delete out.stream;
    const betas = headerValue(headers, 'anthropic-beta');
    if (betas !== undefined && out.anthropic_beta === undefined) {
      const list = betas
        .split(',')
        .map((beta) => beta.trim())
        .filter((beta) => beta !== '');
      if (list.length > 0) out.anthropic_beta = list;
    }
  }
  return out;
}

/** A cloud's throttling is the catalogue's upstream_rate_limited (Vertex: 429 RESOURCE_EXHAUSTED). */
function throwIfCloudThrottled(cloud: AnthropicCloud, status: number, body: JsonValue | string): void {
  if (cloud === 'bedrock') throwIfThrottled(status, body);
  else {
    const throttled = googleThrottling(status, body);
    if (throttled !== undefined) throw throttled;
  }
}

/**
 * A Claude stream's `rate_limit_error` event on a cloud is the cloud throttling the gateway: it gets the
 * catalogue's code, as Bedrock's throttlingException frame does (bedrockExceptionEvent), for every
 * client's translator to keep.
 */
function namedThrottling(event: string | undefined, data: string): string {
  if (event !== 'error' || !data.includes('rate_limit_error')) return data;
  const parsed = parseJsonObject(data);
  const error = parsed?.error;
  if (!isObject(error) || error.type !== 'rate_limit_error' || error.code !== undefined) return data;
  return JSON.stringify({ ...parsed, error: { ...error, code: THROTTLED_CODE } });
}

/** A cloud's error body (Bedrock `{message}`, Google `{error:{message,status}}`) in the Anthropic shape. */
function anthropicError(status: number, body: JsonValue | string): JsonObject {
  if (isObject(body) && isObject(body.error) && body.type !== 'error') {
    return bedrockErrorAsAnthropic(status, { message: body.error.message ?? null });
  }
  return bedrockErrorAsAnthropic(status, body);
}

/** An Anthropic client on a cloud: the body rewritten, replies and events as they are. */
function nativeTranslator(cloud: AnthropicCloud): TranslatorFactory {
  return {
    name: `anthropic_to_${FORMAT[cloud]}`,
    from: 'anthropic',
    to: FORMAT[cloud],
    create(init: TranslatorInit): Translator {
      // Whether the stream said its last word (message_stop, or an error event).
      let ended = false;
      return {
        request: (body) => cloudAnthropicBody(body, cloud, init.headers),
        response: (body) => body,
        streamEvent(event, data) {
          if (ended || parseJsonObject(data) === undefined) return [];
          if (event === 'message_stop' || event === 'error') ended = true;
          return [{ event, data: namedThrottling(event, data) }];
        },
        streamEnd() {
          if (ended) return [];
          ended = true;
          const message = `upstream stream ended before the message was complete (request id: ${init.requestId})`;
          return [{ event: 'error', data: JSON.stringify(anthropicError(502, { message })) }];
        },
        error(status, body) {
          throwIfCloudThrottled(cloud, status, body);
          return anthropicError(status, body);
        },
      };
    },
  };
}

/** `<client>_to_<cloud format>`: the client's translator to Anthropic, then the cloud's rewrite. */
function onCloud(toAnthropic: TranslatorFactory, cloud: AnthropicCloud): TranslatorFactory {
  return {
    name: `${toAnthropic.from}_to_${FORMAT[cloud]}`,
    from: toAnthropic.from,
    to: FORMAT[cloud],
    create(init) {
      const inner = toAnthropic.create(init);
      return {
        request: (body) => cloudAnthropicBody(inner.request(body), cloud, init.headers),
        response: (body) => inner.response(body),
        streamEvent: (event, data) => inner.streamEvent(event, namedThrottling(event, data)),
        streamEnd: (complete) => inner.streamEnd(complete),
        error(status, body) {
          throwIfCloudThrottled(cloud, status, body);
          return inner.error(status, anthropicError(status, body));
        },
      };
    },
  };
}

export const anthropicToBedrockInvoke = nativeTranslator('bedrock');
export const anthropicToVertexAnthropic = nativeTranslator('vertex');

/** For every `<client>_to_anthropic` registered, its counterparts on Bedrock and Vertex. */
export function cloudAnthropicTranslators(
  translators: ReadonlyMap<string, TranslatorFactory>,
): TranslatorFactory[] {
  const out: TranslatorFactory[] = [];
  for (const t of translators.values()) {
    if (t.to !== 'anthropic' || t.name !== `${t.from}_to_anthropic`) continue;
    out.push(onCloud(t, 'bedrock'), onCloud(t, 'vertex'));
  }
  return out;
}

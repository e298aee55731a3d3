// The Google publisher on Vertex takes the Gemini API's generateContent bodies and answers with its
// replies, streams and error shape, so `<client>_to_vertex_gemini` is the client's translator to Gemini
// (the client's own body for a Gemini client). What Vertex adds is the catalogue's answer to its
// throttling: a 429 RESOURCE_EXHAUSTED, before the stream or as a stream's error chunk, is
// `upstream_rate_limited` in the client's shape.

import { GatewayError } from '../../../common/errors.ts';
import { isObject, parseJsonObject, THROTTLED_CODE } from '../../translators/json.ts';
import type { TranslatorFactory } from '../../translators/types.ts';
import { geminiErrorBody, googleThrottling } from '../gemini/errors.ts';

/**
 * A stream's error chunk that is Vertex throttling the gateway (429 RESOURCE_EXHAUSTED), as the
 * catalogue's error in the Gemini shape with Google's message, for every client's translator to keep.
 */
function namedThrottling(data: string, requestId: string): string {
  if (!data.includes('"error"')) return data;
  const error = parseJsonObject(data)?.error;
  if (!isObject(error) || (error.code !== 429 && error.status !== 'RESOURCE_EXHAUSTED')) return data;
  const message = typeof error.message === 'string' ? error.message : undefined;
  return JSON.stringify(geminiErrorBody(new GatewayError(THROTTLED_CODE, message), requestId));
}

/** A Gemini client's body, reply and events as they are. */
const geminiAsIs: TranslatorFactory = {
  name: 'gemini',
  from: 'gemini',
  to: 'gemini',
  create: (init) => ({
    request: (body) => body,
    response: (body) => body,
    // Every Gemini event is a JSON object; anything else is not passed on as one.
    streamEvent: (event, data) => (parseJsonObject(data) === undefined ? [] : [{ event, data }]),
    // A Gemini stream has no closing event: only a cut one needs saying.
    streamEnd: (complete) =>
      complete
        ? []
        : [
            {
              data: JSON.stringify({
                error: {
                  code: 502,
                  message: `upstream stream ended before the reply was complete (request id: ${init.requestId})`,
                  status: 'UNAVAILABLE',
                },
              }),
            },
          ],
    error: (_status, body) => body,
  }),
};

function onVertex(toGemini: TranslatorFactory): TranslatorFactory {
  return {
    name: `${toGemini.from}_to_vertex_gemini`,
    from: toGemini.from,
    to: 'vertex_gemini',
    create(init) {
      const inner = toGemini.create(init);
      return {
        request: (body) => inner.request(body),
        response: (body) => inner.response(body),
        streamEvent: (event, data) => inner.streamEvent(event, namedThrottling(data, init.requestId)),
        streamEnd: (complete) => inner.streamEnd(complete),
        error(status, body) {
          const throttled = googleThrottling(status, body);
          if (throttled !== undefined) throw throttled;
          return inner.error(status, body);
        },
      };
    },
  };
}

/** `<client>_to_vertex_gemini` for every `<client>_to_gemini`, and for Gemini clients. */
export function vertexGeminiTranslators(
  translators: ReadonlyMap<string, TranslatorFactory>,
): TranslatorFactory[] {
  const out = [onVertex(geminiAsIs)];
  for (const t of translators.values()) {
    if (t.to === 'gemini' && t.name === `${t.from}_to_gemini`) out.push(onVertex(t));
  }
  return out;
}

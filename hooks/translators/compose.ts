// Translation through the pivot: a client family reaches a provider family that is not the pivot by two
// hops, client -> pivot (`toPivot`, e.g. anthropic_to_openai) then pivot -> provider (`fromPivot`, e.g.
// openai_to_gemini). Requests run client-side first; replies, stream events and error bodies run
// provider-side first. What the pivot cannot carry is lost (docs/translation.md "Double hops").

import type { SseOut } from '../../common/types.ts';
import { defineTranslator, type Translator, type TranslatorFactory } from './types.ts';

export function composeTranslators(
  toPivot: TranslatorFactory,
  fromPivot: TranslatorFactory,
): TranslatorFactory {
  if (toPivot.to !== fromPivot.from) {
    throw new Error(`${toPivot.name} and ${fromPivot.name} do not meet at one pivot format`);
  }
  return defineTranslator(`${toPivot.from}_to_${fromPivot.to}`, (init): Translator => {
    const client = toPivot.create(init);
    const provider = fromPivot.create(init);
    const throughClient = (events: SseOut[]): SseOut[] => {
      if (events.length === 0) return events;
      const out: SseOut[] = [];
      for (const ev of events) out.push(...client.streamEvent(ev.event, ev.data));
      return out;
    };
    return {
      request: (body) => provider.request(client.request(body)),
      response: (body) => client.response(provider.response(body)),
      streamEvent: (event, data) => throughClient(provider.streamEvent(event, data)),
      streamEnd: (complete) => [
        ...throughClient(provider.streamEnd(complete)),
        ...client.streamEnd(complete),
      ],
      error: (status, body) => client.error(status, provider.error(status, body)),
    };
  });
}

/**
 * Every client -> provider pair that meets at `pivot`: `<a>_to_<pivot>` composed with `<pivot>_to_<b>`
 * for a != b. Only plain names take part (`openai_embeddings_to_gemini` is one api's translator).
 */
export function pivotCompositions(
  translators: readonly TranslatorFactory[],
  pivot: string,
): TranslatorFactory[] {
  const plain = translators.filter((t) => t.name === `${t.from}_to_${t.to}`);
  const toPivot = plain.filter((t) => t.to === pivot && t.from !== pivot);
  const fromPivot = plain.filter((t) => t.from === pivot && t.to !== pivot);
  const out: TranslatorFactory[] = [];
  for (const a of toPivot) {
    for (const b of fromPivot) if (a.from !== b.to) out.push(composeTranslators(a, b));
  }
  return out;
}

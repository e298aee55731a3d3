// Counting translators: a client family's counting request forwarded to another provider family's
// counting endpoint. The body goes through the generation translator of the same pair (the count must
// see what the model would see), then into the provider's counting request; the provider's number comes
// back in the client's shape. Errors are the generation translator's.

import type { JsonValue } from '../../common/types.ts';
import { defineTranslator, type TranslatorFactory } from '../translators/types.ts';
import type { TokenCount } from './types.ts';

export function countTranslator(
  client: TokenCount & { readonly family: string },
  generation: TranslatorFactory,
  provider: Pick<TokenCount, 'requestFor' | 'read'> & { readonly family: string },
): TranslatorFactory {
  const requestFor = provider.requestFor;
  if (requestFor === undefined) throw new Error(`${provider.family} has no counting request`);
  return defineTranslator(`${client.family}_count_to_${provider.family}`, (init) => {
    const translate = generation.create({ ...init, stream: false });
    return {
      request(body) {
        const generation = client.generationBody?.(body) ?? body;
        return requestFor(translate.request({ ...generation, stream: false }), init.upstreamModel);
      },
      response(reply: JsonValue): JsonValue {
        const tokens = provider.read(reply);
        // A 2xx without a count is the upstream's fault; made-up numbers would mislead the client.
        if (tokens === undefined) throw new Error('the upstream counting reply has no count');
        return client.reply(tokens);
      },
      streamEvent: () => [],
      streamEnd: () => [],
      error: (status, body) => translate.error(status, body),
    };
  });
}

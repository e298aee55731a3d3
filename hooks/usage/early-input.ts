// The serving provider's count of a streamed request's input, asked alongside the generation
// (proxy/early-count.ts) for a client whose stream states its input before the upstream reports it
// (Anthropic's message_start). The proxy sets it once the provider answered in time; the translator that
// writes the stream's first event reads it (hooks/builtin/rule-translators.ts), and so does the metering
// of a stream interrupted before the provider's final usage (proxy/metering.ts). One number a request,
// never the count's reply.

import { RequestState } from '../../common/request-state.ts';
import type { RequestContext } from '../../common/types.ts';

const PROVIDER_COUNT = new RequestState<number | undefined>();

/** The provider's count of the request's input, when it answered before the stream's first event. */
export function providerInputCount(ctx: RequestContext): number | undefined {
  return PROVIDER_COUNT.get(ctx);
}

export function setProviderInputCount(ctx: RequestContext, tokens: number): void {
  PROVIDER_COUNT.set(ctx, tokens);
}

/** The attempt the count was asked for did not serve the request: another provider's count is not it. */
export function forgetProviderInputCount(ctx: RequestContext): void {
  if (PROVIDER_COUNT.get(ctx) !== undefined) PROVIDER_COUNT.set(ctx, undefined);
}

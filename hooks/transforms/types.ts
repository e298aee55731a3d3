// SSE transforms named by `sse_parse <name>;` that are not translators: small per-request stream filters.
// The families declare them (WireFamily.transforms); the registry hooks/families/index.ts lists them.

import type { RequestContext, SseOut } from '../../common/types.ts';

export interface StreamTransform {
  event(event: string | undefined, data: string): SseOut[];
  end(): SseOut[];
}

export interface StreamTransformFactory {
  readonly name: string;
  create(ctx: RequestContext): StreamTransform;
}

// SSE transforms that are not translators, by their DSL name (`sse_parse <name>;`).

import { openaiUsageStrip } from './openai-usage-strip.ts';
import type { StreamTransformFactory } from './types.ts';

export const TRANSFORMS: ReadonlyMap<string, StreamTransformFactory> = new Map([
  [openaiUsageStrip.name, openaiUsageStrip],
]);

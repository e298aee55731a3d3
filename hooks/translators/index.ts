// Every translator by its DSL name. A provider file names them in `req_map`, `resp_map` and `sse_parse`.

import { anthropicToOpenai } from './anthropic-to-openai.ts';
import { geminiToOpenai } from './gemini-to-openai.ts';
import { openaiEmbeddingsToGemini } from './openai-embeddings-to-gemini.ts';
import { openaiToAnthropic } from './openai-to-anthropic.ts';
import { openaiToGemini } from './openai-to-gemini.ts';
import type { TranslatorFactory } from './types.ts';

export const TRANSLATORS: ReadonlyMap<string, TranslatorFactory> = new Map(
  [openaiToAnthropic, anthropicToOpenai, openaiToGemini, geminiToOpenai, openaiEmbeddingsToGemini].map(
    (t): [string, TranslatorFactory] => [t.name, t],
  ),
);

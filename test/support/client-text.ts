// Test support: the generated text a client received, in any of the three wire families
// (completion-style, Anthropic, Gemini), from a JSON reply or from the whole events of an SSE stream.
// Tests compare billed output tokens with the estimate of this text.

type Json = Record<string, unknown>;

function rec(value: unknown): Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** The JSON `data:` payloads of the whole events of an SSE text (a trailing partial event is left out). */
export function ssePayloads(sse: string): Json[] {
  const blocks = sse.split(/\r?\n\r?\n/);
  blocks.pop();
  const out: Json[] = [];
  for (const block of blocks) {
    for (const line of block.split(/\r?\n/)) {
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data === '' || data === '[DONE]') continue;
      try {
        out.push(rec(JSON.parse(data)));
      } catch {
        // not JSON: carries no generated text
      }
    }
  }
  return out;
}

/** Generated text of one stream event or JSON reply document. */
export function documentText(doc: Json): string {
  let text = '';
  const delta = rec(doc.delta);
  if (typeof delta.text === 'string') text += delta.text;
  for (const block of list(doc.content)) {
    if (typeof rec(block).text === 'string') text += rec(block).text;
  }
  for (const candidate of list(doc.candidates)) {
    for (const part of list(rec(rec(candidate).content).parts)) {
      if (typeof rec(part).text === 'string') text += rec(part).text;
    }
  }
  for (const choice of list(doc.choices)) {
    const c = rec(choice);
    if (typeof rec(c.delta).content === 'string') text += rec(c.delta).content;
    if (typeof rec(c.message).content === 'string') text += rec(c.message).content;
    if (typeof c.text === 'string') text += c.text;
  }
  return text;
}

/** Generated text of the whole events of an SSE text. */
export function streamedText(sse: string): string {
  return ssePayloads(sse).map(documentText).join('');
}

/** Whole events of an SSE text that carry generated text. */
export function textEventCount(sse: string): number {
  return ssePayloads(sse).filter((doc) => documentText(doc) !== '').length;
}

/** Generated text of a JSON reply body ('' for an error body or anything unparsable). */
export function replyText(body: string): string {
  try {
    return documentText(rec(JSON.parse(body)));
  } catch {
    return '';
  }
}

// One path segment from any text (a model name in a path): escaped so that it stays one segment, never a
// dot segment, a query or a fragment. Used by the DSL's path templates and by the families' path routes.

/**
 * RFC 3986 pchar except ':', which stays escaped because some APIs read `:method` after the model
 * segment (`llama3:8b` becomes `llama3%3A8b`); everything else outside pchar is %XX.
 */
const SEGMENT_SAFE = /^[A-Za-z0-9\-._~!$&'()*+,;=@]*$/;

export function escapePathSegment(value: string): string {
  if (value === '.') return '%2E';
  if (value === '..') return '%2E%2E';
  if (SEGMENT_SAFE.test(value)) return value;
  let out = '';
  for (const ch of value) {
    out += SEGMENT_SAFE.test(ch)
      ? ch
      : Array.from(Buffer.from(ch, 'utf8'), (b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(
          '',
        );
  }
  return out;
}

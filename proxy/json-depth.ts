// Nesting depth of a JSON text, measured before it is parsed: a body nested thousands deep parses, but
// every recursive walk after it (schema check, rule ops, serializing it upstream, usage estimation)
// would overflow the stack, and a deep body costs far more memory than its bytes.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/** True when arrays and objects in `text` nest deeper than `max` (brackets inside strings do not count). */
export function jsonDeeperThan(text: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const b = text[i];
    if (inString) {
      if (b === BACKSLASH) i++;
      else if (b === QUOTE) inString = false;
    } else if (b === QUOTE) inString = true;
    else if (b === OPEN_ARRAY || b === OPEN_OBJECT) {
      if (++depth > max) return true;
    } else if (b === CLOSE_ARRAY || b === CLOSE_OBJECT) depth--;
  }
  return false;
}

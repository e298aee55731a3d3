// Tokenizer of the provider DSL. It never throws: problems become diagnostics and the offending
// characters are skipped, so the parser can still report everything else in the file.

export interface Pos {
  /** 1-based line. */
  readonly line: number;
  /** 1-based column, in UTF-16 code units. */
  readonly col: number;
}

export type TokenKind =
  | 'word'
  | 'string'
  | 'number'
  | '{'
  | '}'
  | ';'
  | '='
  | '('
  | ')'
  | '['
  | ']'
  | ','
  | ':'
  | 'eof';

export interface Token {
  readonly kind: TokenKind;
  /** Decoded value: the word, the unescaped string, or the number's source text. */
  readonly text: string;
  readonly pos: Pos;
  /** Position just after the token's last character. */
  readonly end: Pos;
  /**
   * For strings: the source column of each UTF-16 unit of `text`, so diagnostics about a part of a
   * string (a template variable, a JSON path) can point into it. Strings never span lines.
   */
  readonly cols?: readonly number[];
}

export interface LexError {
  readonly pos: Pos;
  readonly message: string;
}

const PUNCTUATION = new Set(['{', '}', ';', '=', '(', ')', '[', ']', ',', ':']);
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  $: '$',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

function isWordStart(c: string): boolean {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_';
}

function isWordChar(c: string): boolean {
  return isWordStart(c) || (c >= '0' && c <= '9');
}

function isDigit(c: string): boolean {
  return c >= '0' && c <= '9';
}

/** Splits source text into tokens. The last token is always `eof`. */
export function tokenize(source: string): { tokens: Token[]; errors: LexError[] } {
  const tokens: Token[] = [];
  const errors: LexError[] = [];
  let i = 0;
  let line = 1;
  let lineStart = 0;

  function pos(at: number): Pos {
    return { line, col: at - lineStart + 1 };
  }

  function newline(at: number): void {
    line += 1;
    lineStart = at + 1;
  }

  while (i < source.length) {
    const c = source.charAt(i);
    if (c === '\n') {
      newline(i);
      i += 1;
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\r' || c === '\f' || c === '\v' || c === '\uFEFF') {
      i += 1;
      continue;
    }
    if (c === '#' || (c === '/' && source[i + 1] === '/')) {
      while (i < source.length && source[i] !== '\n') i += 1;
      continue;
    }
    if (c === '/' && source[i + 1] === '*') {
      const start = pos(i);
      i += 2;
      let closed = false;
      while (i < source.length) {
        if (source[i] === '*' && source[i + 1] === '/') {
          i += 2;
          closed = true;
          break;
        }
        if (source[i] === '\n') newline(i);
        i += 1;
      }
      if (!closed) errors.push({ pos: start, message: 'unterminated comment' });
      continue;
    }
    if (PUNCTUATION.has(c)) {
      const start = pos(i);
      i += 1;
      tokens.push({ kind: c as TokenKind, text: c, pos: start, end: pos(i) });
      continue;
    }
    if (c === '"') {
      i = lexString(i);
      continue;
    }
    if (isDigit(c) || (c === '-' && isDigit(source[i + 1] ?? ''))) {
      const start = pos(i);
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(source);
      let j = i + (m ? m[0].length : 1);
      if (j < source.length && (isWordChar(source.charAt(j)) || source[j] === '.')) {
        while (j < source.length && (isWordChar(source.charAt(j)) || source[j] === '.')) j += 1;
        errors.push({ pos: start, message: `invalid number "${source.slice(i, j)}"` });
        i = j;
        continue;
      }
      tokens.push({ kind: 'number', text: source.slice(i, j), pos: start, end: pos(j) });
      i = j;
      continue;
    }
    if (isWordStart(c)) {
      const start = pos(i);
      let j = i + 1;
      while (j < source.length && isWordChar(source.charAt(j))) j += 1;
      tokens.push({ kind: 'word', text: source.slice(i, j), pos: start, end: pos(j) });
      i = j;
      continue;
    }
    const cp = source.codePointAt(i) ?? 0;
    const shown = cp >= 0x20 && cp < 0x7f ? `"${c}"` : `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
    errors.push({ pos: pos(i), message: `unexpected character ${shown}` });
    i += cp > 0xffff ? 2 : 1;
  }
  const endPos = pos(i);
  tokens.push({ kind: 'eof', text: '', pos: endPos, end: endPos });
  return { tokens, errors };

  /** Reads a double-quoted string starting at `start`; returns the index after it. */
  function lexString(start: number): number {
    const startPos = pos(start);
    let text = '';
    const cols: number[] = [];
    let j = start + 1;
    while (j < source.length) {
      const ch = source[j];
      if (ch === '"') {
        j += 1;
        tokens.push({ kind: 'string', text, pos: startPos, end: pos(j), cols });
        return j;
      }
      if (ch === '\n') break;
      const col = j - lineStart + 1;
      if (ch !== '\\') {
        text += ch;
        cols.push(col);
        j += 1;
        continue;
      }
      const esc = source[j + 1];
      const simple = esc === undefined ? undefined : SIMPLE_ESCAPES[esc];
      if (simple !== undefined) {
        text += simple;
        cols.push(col);
        j += 2;
        continue;
      }
      if (esc === 'u' && /^[0-9a-fA-F]{4}$/.test(source.slice(j + 2, j + 6))) {
        text += String.fromCharCode(Number.parseInt(source.slice(j + 2, j + 6), 16));
        cols.push(col);
        j += 6;
        continue;
      }
      errors.push({
        pos: pos(j),
        message: `invalid escape "\\${esc === undefined || esc === '\n' ? '' : esc}"`,
      });
      j += esc === undefined || esc === '\n' ? 1 : 2;
    }
    errors.push({ pos: startPos, message: 'unterminated string' });
    // Keep what was read so the parser sees a value and does not cascade into more errors.
    tokens.push({ kind: 'string', text, pos: startPos, end: pos(j), cols });
    return j;
  }
}

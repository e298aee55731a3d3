// Test support: the comments of a source file, with their line numbers. A small scanner, not a parser:
// it steps over string, template and regular-expression literals so that `//` inside them is not taken
// for a comment. `#` files (YAML, shell, nginx, systemd, provider DSL) have `#` comments, and the
// provider DSL `//` ones too.

export interface Comment {
  readonly line: number;
  readonly text: string;
}

const SCRIPT = /\.(ts|mts|cts|js|mjs|cjs)$/;

export function commentsOf(path: string, source: string): Comment[] {
  return SCRIPT.test(path) ? scriptComments(source) : hashComments(source, path.endsWith('.conf'));
}

function hashComments(source: string, slashesToo: boolean): Comment[] {
  const out: Comment[] = [];
  source.split('\n').forEach((raw, i) => {
    const m = /(?:^|\s)(#|\/\/)(.*)$/.exec(raw);
    if (m !== null && (m[1] === '#' || slashesToo)) out.push({ line: i + 1, text: m[2]! });
  });
  return out;
}

// After one of these (or at the start) a `/` begins a regular expression, elsewhere it divides.
const BEFORE_REGEX = new Set([...'(,=:[!&|?{};+-*%<>~^'].concat(['', 'return', 'typeof']));

function scriptComments(src: string): Comment[] {
  const out: Comment[] = [];
  let line = 1;
  let prev = '';
  // Template literal nesting: each entry counts the open braces of one `${ ... }`.
  const templates: number[] = [];
  let i = 0;
  const n = src.length;
  const skipString = (quote: string): void => {
    i++;
    while (i < n && src[i] !== quote) {
      if (src[i] === '\\') i++;
      else if (src[i] === '\n') line++;
      i++;
    }
    i++;
  };
  // Scans template text from i (just after ` or }) to the closing ` or to a `${`.
  const skipTemplate = (): void => {
    while (i < n) {
      const c = src[i];
      if (c === '\\') i += 2;
      else if (c === '`') {
        i++;
        return;
      } else if (c === '$' && src[i + 1] === '{') {
        i += 2;
        templates.push(0);
        return;
      } else {
        if (c === '\n') line++;
        i++;
      }
    }
  };
  while (i < n) {
    const c = src[i]!;
    if (c === '\n') {
      line++;
      i++;
    } else if (c === ' ' || c === '\t' || c === '\r') {
      i++;
    } else if (c === '/' && src[i + 1] === '/') {
      const end = src.indexOf('\n', i);
      const stop = end === -1 ? n : end;
      out.push({ line, text: src.slice(i + 2, stop) });
      i = stop;
    } else if (c === '/' && src[i + 1] === '*') {
      const end = src.indexOf('*/', i + 2);
      const stop = end === -1 ? n : end;
      src
        .slice(i + 2, stop)
        .split('\n')
        .forEach((text, k) => {
          out.push({ line: line + k, text });
        });
      for (let k = i; k < stop; k++) if (src[k] === '\n') line++;
      i = stop + 2;
    } else if (c === '"' || c === "'") {
      skipString(c);
      prev = 'literal';
    } else if (c === '`') {
      i++;
      skipTemplate();
      prev = 'literal';
    } else if (c === '/' && BEFORE_REGEX.has(prev)) {
      let inClass = false;
      i++;
      while (i < n && src[i] !== '\n' && (inClass || src[i] !== '/')) {
        if (src[i] === '\\') i++;
        else if (src[i] === '[') inClass = true;
        else if (src[i] === ']') inClass = false;
        i++;
      }
      i++;
      prev = 'literal';
    } else if (/[\w$]/.test(c!)) {
      const start = i;
      while (i < n && /[\w$]/.test(src[i]!)) i++;
      prev = src.slice(start, i);
    } else {
      if (templates.length > 0) {
        if (c === '{') templates[templates.length - 1]!++;
        else if (c === '}') {
          if (templates[templates.length - 1] === 0) {
            templates.pop();
            i++;
            skipTemplate();
            prev = 'literal';
            continue;
          }
          templates[templates.length - 1]!--;
        }
      }
      prev = c;
      i++;
    }
  }
  return out;
}

// `node scripts/function-lengths.ts [--max 200]`: the product's functions longer than --max lines (one
// that long is asking to be split by job). Prints one line per function and exits 1 when there is any.
// Parsed with @swc/core; sim/, bench/, test/, scripts/ and examples/ are not product.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import swc from '@swc/core';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const PRODUCT = ['common', 'config', 'store', 'hooks', 'billing', 'sidecar', 'proxy', 'admin', 'bin'];
const FUNCTIONS = new Set([
  'FunctionDeclaration',
  'FunctionExpression',
  'ArrowFunctionExpression',
  'ClassMethod',
  'PrivateMethod',
  'Constructor',
  'GetterProperty',
  'SetterProperty',
  'MethodProperty',
]);

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

interface Span {
  start: number;
  end: number;
}

/** `file:line: name (n lines)` for every function of the product longer than `max` lines. */
export function longFunctions(max: number): string[] {
  const found: string[] = [];
  for (const file of PRODUCT.flatMap((d) => sources(join(ROOT, d)))) {
    const text = readFileSync(file, 'utf8');
    const bytes = Buffer.from(text);
    // swc numbers spans across every file it parsed; the module's own span is the origin.
    const ast = swc.parseSync(text, { syntax: 'typescript' }) as unknown as { span: Span };
    const lineOf = (at: number) =>
      bytes
        .subarray(0, at - ast.span.start)
        .toString('utf8')
        .split('\n').length;
    const visit = (node: unknown): void => {
      if (node === null || typeof node !== 'object') return;
      if (Array.isArray(node)) {
        for (const child of node) visit(child);
        return;
      }
      const n = node as { type?: string; span?: Span; [k: string]: unknown };
      if (n.type !== undefined && FUNCTIONS.has(n.type) && n.span !== undefined) {
        const first = lineOf(n.span.start);
        const lines = lineOf(n.span.end) - first + 1;
        if (lines > max) found.push(`${relative(ROOT, file)}:${first}: ${lines} lines`);
      }
      for (const [key, value] of Object.entries(n)) if (key !== 'span') visit(value);
    };
    visit(ast);
  }
  return found;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { max: { type: 'string', default: '200' } } });
  const found = longFunctions(Number(values.max));
  for (const line of found) console.log(line);
  process.exitCode = found.length > 0 ? 1 : 0;
}

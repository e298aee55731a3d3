// Prints a syntax tree back to DSL source in a canonical layout (two-space indent, one directive per
// line). parse(print(ast)) gives the same tree apart from positions; the property tests rely on that.

import type { ArgNode, DirectiveNode, FileNode } from './parser.ts';

function printArg(a: ArgNode): string {
  switch (a.kind) {
    case 'word':
      return a.value;
    case 'string':
      return JSON.stringify(a.value);
    case 'number':
      return a.raw;
    case 'equals':
      return '=';
    case 'call':
      return `${a.name}(${a.args.map(printArg).join(', ')})`;
    case 'array':
      return `[${a.items.map(printArg).join(', ')}]`;
    case 'object':
      return `{ ${a.entries.map((e) => `${JSON.stringify(e.key.value)}: ${printArg(e.value)}`).join(', ')} }`;
  }
}

function printDirective(d: DirectiveNode, indent: string, out: string[]): void {
  const head = [d.name, ...d.args.map(printArg)].join(' ');
  if (!d.block) {
    out.push(`${indent}${head};`);
    return;
  }
  out.push(`${indent}${head} {`);
  for (const child of d.block.directives) printDirective(child, `${indent}  `, out);
  out.push(`${indent}}`);
}

/** Canonical source text of a syntax tree. */
export function print(ast: FileNode): string {
  const out: string[] = [];
  for (const d of ast.directives) printDirective(d, '', out);
  return `${out.join('\n')}\n`;
}

// `${NAME}` and `${NAME:-default}` in string values of the YAML files (shell semantics: the default is
// used when the variable is unset or empty). `$${` writes a literal `${`. Keys are never interpolated.

import { childPointer, displayPath } from '../common/config-diagnostics.ts';
import type { ConfigDiagnostic } from '../common/config-types.ts';
import type { YamlFile } from '../common/yaml-source.ts';

export type Env = Readonly<Record<string, string | undefined>>;

const REFERENCE = /\$\$\{|\$\{([^}]*)\}|\$\{/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

interface InterpolationResult {
  readonly value: string;
  readonly problems: readonly string[];
}

export function interpolateString(text: string, env: Env): InterpolationResult {
  const problems: string[] = [];
  const value = text.replace(REFERENCE, (match: string, body: string | undefined) => {
    if (match === '$${') return '${';
    if (body === undefined) {
      problems.push('unterminated "${" (write "$${" for a literal "${")');
      return match;
    }
    const cut = body.indexOf(':-');
    const name = cut === -1 ? body : body.slice(0, cut);
    if (!NAME.test(name)) {
      // The text is not echoed: it may be part of a secret that merely contains "${".
      problems.push(
        'invalid environment variable reference (names are letters, digits and "_"; write "$${" for a literal "${")',
      );
      return match;
    }
    const found = env[name];
    if (found !== undefined && found !== '') return found;
    if (cut !== -1) return body.slice(cut + 2);
    problems.push(`environment variable ${name} is not set (write \${${name}:-default} to allow that)`);
    return match;
  });
  return { value, problems };
}

/**
 * Interpolates every string value of the document in place and returns the pointers of the values
 * that contained a reference (the validator may coerce those to the number or boolean the schema wants).
 */
export function interpolateDocument(
  yaml: YamlFile,
  root: unknown,
  env: Env,
  diagnostics: ConfigDiagnostic[],
): Set<string> {
  const touched = new Set<string>();
  function visit(node: unknown, pointer: string): unknown {
    if (typeof node === 'string') {
      if (!node.includes('${')) return node;
      const { value, problems } = interpolateString(node, env);
      for (const problem of problems)
        diagnostics.push(yaml.at(pointer, `${displayPath(pointer)}: ${problem}`));
      touched.add(pointer);
      return value;
    }
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) node[i] = visit(node[i], childPointer(pointer, i));
      return node;
    }
    if (typeof node === 'object' && node !== null) {
      const record = node as Record<string, unknown>;
      for (const key of Object.keys(record)) record[key] = visit(record[key], childPointer(pointer, key));
      return record;
    }
    return node;
  }
  visit(root, '');
  return touched;
}

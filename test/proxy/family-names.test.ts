// The proxy core never names a wire family: everything family-specific is asked of the registry
// (hooks/families/index.ts). Comments may name one as an example; code (strings included) may not.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { commentsOf } from '../support/source-comments.ts';

const ROOT = join(import.meta.dirname, '..', '..');

/** Folders of the proxy core: everything outside hooks/families, hooks/translators and hooks/usage. */
const CORE = ['proxy', 'common', 'store', 'billing', 'hooks/builtin', 'hooks/dsl', 'hooks/transforms'];

const FAMILY_WORDS = /anthropic|gemini|openai|google|usageMetadata|x-goog|x-api-key/i;

/**
 * DSL directive names that name a cloud's credential scheme, not a wire family: the DSL compiles them
 * and the rule hook knows them like auth_bearer (docs/dsl.md "Cloud credentials").
 */
const CREDENTIAL_DIRECTIVES = /\bauth_google\b/g;

/** Generated from the JSON Schemas, whose descriptions name families as examples for the operator. */
const GENERATED = new Set(['config/schema-const.ts']);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** The source with its comments blanked, line numbers kept. */
function codeOf(path: string, source: string): string[] {
  const lines = source.split('\n');
  for (const comment of commentsOf(path, source)) {
    const i = comment.line - 1;
    const at = lines[i]?.lastIndexOf(comment.text) ?? -1;
    if (at >= 0) lines[i] = lines[i]!.slice(0, at) + lines[i]!.slice(at + comment.text.length);
  }
  return lines;
}

function familyNames(): string[] {
  const found: string[] = [];
  for (const folder of CORE) {
    for (const path of sourceFiles(join(ROOT, folder))) {
      const rel = relative(ROOT, path);
      if (GENERATED.has(rel)) continue;
      codeOf(path, readFileSync(path, 'utf8')).forEach((line, i) => {
        const m = FAMILY_WORDS.exec(line.replace(CREDENTIAL_DIRECTIVES, ''));
        if (m !== null) found.push(`${rel}:${i + 1}: ${m[0]}`);
      });
    }
  }
  return found;
}

test('no proxy-core file names a wire family outside its comments', () => {
  assert.deepEqual(familyNames(), []);
});

test('the check sees a family named in code and ignores one named in a comment', () => {
  const source = "// the openai shape, for example\nconst a = 'anthropic';\n/** gemini */\nconst b = 1;\n";
  const hits = codeOf('x.ts', source).flatMap((line, i) => (FAMILY_WORDS.test(line) ? [i + 1] : []));
  assert.deepEqual(hits, [2]);
});

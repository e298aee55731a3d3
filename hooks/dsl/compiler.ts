// Gives the generic syntax tree its meaning: checks every directive, its arguments and the names it
// refers to (translators, transforms, usage presets), merges `defaults` into each `match` rule and
// produces the plain CompiledProvider objects the proxy reads per request. It reports as many problems
// as it can find in one pass, each at the exact line:col of the offending token. This file is the top
// level (syntax, provider, defaults, match); the blocks of a rule body are compiled in compile-*.ts.

import { basename } from 'node:path';
import { baseUrlEnvName, normalizeBaseUrl } from './compile-blocks.ts';
import { compileBody } from './compile-body.ts';
import { BODY_DIRECTIVES, type BodyParts, CompileContext, type MatchHead } from './compile-context.ts';
import { compileMatchHead, mergeRule } from './compile-match.ts';
import type { DirectiveNode, FileNode, Pos } from './parser.ts';
import type { CompiledProvider, CompiledRule, DslDiagnostic, DslRegistries } from './types.ts';

export const SYNTAX_VERSION = 'next-router/0.1';

export interface CompileOptions {
  readonly registries: DslRegistries;
  /** Read for ROUTER_PROVIDER_<NAME>_BASE_URL and `${env.NAME}` in templates. */
  readonly env: Readonly<Record<string, string | undefined>>;
}

export interface CompileResult {
  readonly provider: CompiledProvider | undefined;
  readonly diagnostics: DslDiagnostic[];
}

const PROVIDER_NAME = /^[a-z0-9][a-z0-9_-]*$/;

/** Compiles a parsed provider file. `file` is used for diagnostics and to resolve hook modules. */
export function compileAst(file: string, ast: FileNode, opts: CompileOptions): CompileResult {
  const cx = new CompileContext(file, opts.registries, opts.env);
  const diagnostics = cx.diagnostics;
  const _env = opts.env;

  let syntax: string | undefined;
  let syntaxSeen = false;
  let providerDirective: DirectiveNode | undefined;
  for (const d of ast.directives) {
    if (d.name === 'syntax') {
      if (syntaxSeen) {
        cx.error(d.loc, 'duplicate syntax directive');
        continue;
      }
      syntaxSeen = true;
      if (providerDirective) cx.error(d.loc, 'syntax must come before the provider block');
      const args = cx.noBlock(d) ? cx.arity(d, ['version']) : undefined;
      if (!args) continue;
      const s = cx.str(args[0], 'the syntax version');
      if (!s) continue;
      if (s.value !== SYNTAX_VERSION) {
        cx.error(s.loc, `unsupported syntax ${JSON.stringify(s.value)} (expected "${SYNTAX_VERSION}")`);
        continue;
      }
      syntax = s.value;
      continue;
    }
    if (d.name === 'provider') {
      if (providerDirective) {
        cx.error(d.loc, 'only one provider per file');
        continue;
      }
      providerDirective = d;
      continue;
    }
    cx.error(d.loc, `unknown directive "${d.name}" at the top level (expected syntax, provider)`);
  }
  if (!syntaxSeen)
    cx.error({ line: 1, col: 1 }, `missing \`syntax "${SYNTAX_VERSION}";\` at the top of the file`);
  if (!providerDirective) {
    cx.error({ line: 1, col: 1 }, 'missing provider "<name>" { ... } block');
    return { provider: undefined, diagnostics };
  }

  const pd = providerDirective;
  let providerName: string | undefined;
  let providerNameAt: Pos = pd.loc;
  const pdArgs = cx.arity(pd, ['name']);
  if (pdArgs) {
    const s = cx.str(pdArgs[0], 'the provider name');
    if (s && !PROVIDER_NAME.test(s.value)) {
      cx.error(
        s.loc,
        `invalid provider name ${JSON.stringify(s.value)} (use lower-case letters, digits, "-" and "_")`,
      );
    } else if (s) {
      providerName = s.value;
      providerNameAt = s.loc;
      const base = basename(file);
      if (base.endsWith('.conf') && base.slice(0, -'.conf'.length) !== s.value) {
        cx.error(s.loc, `provider name ${JSON.stringify(s.value)} does not match the file name "${base}"`);
      }
    }
  }
  cx.needBlock(pd);

  cx.providerName = providerName;
  let envBaseUrl: string | undefined;
  if (providerName) {
    const envName = baseUrlEnvName(providerName);
    const raw = cx.env[envName];
    if (raw !== undefined && raw !== '') {
      const r = normalizeBaseUrl(raw);
      cx.baseUrlOverridden = true;
      if (r.ok) envBaseUrl = r.url;
      else cx.error(providerNameAt, `${envName}: ${r.message}`);
    }
  }

  let defaults: BodyParts | undefined;
  let defaultsAt: Pos | undefined;
  const matches: { d: DirectiveNode; head: MatchHead; body: BodyParts }[] = [];
  for (const d of pd.block?.directives ?? []) {
    if (d.name === 'defaults') {
      if (defaultsAt) {
        cx.error(d.loc, `duplicate defaults block (the first is at ${defaultsAt.line}:${defaultsAt.col})`);
        continue;
      }
      defaultsAt = d.loc;
      if (cx.arity(d, []) && cx.needBlock(d)) defaults = compileBody(cx, d.block);
      continue;
    }
    if (d.name === 'match') {
      const head = compileMatchHead(cx, d);
      const body = cx.needBlock(d) ? compileBody(cx, d.block) : undefined;
      if (body) matches.push({ d, head, body });
      continue;
    }
    const home = BODY_DIRECTIVES.includes(d.name) ? `; "${d.name}" goes inside defaults or match` : '';
    cx.error(d.loc, `unknown directive "${d.name}" in provider (expected defaults, match)${home}`);
  }
  if (pd.block && matches.length === 0) {
    cx.error(pd.loc, 'the provider has no match rules');
  }

  const rules: CompiledRule[] = [];
  for (const [j, { d, head, body }] of matches.entries()) {
    const shadow = head.ok
      ? matches
          .slice(0, j)
          .find(
            (m) =>
              m.head.ok &&
              m.head.api === head.api &&
              (m.head.stream === undefined || m.head.stream === head.stream) &&
              (m.head.model === undefined || m.head.model === head.model),
          )
      : undefined;
    if (shadow) {
      const s = shadow.d.loc;
      cx.error(
        d.loc,
        `rule is unreachable: the rule at ${s.line}:${s.col} already matches everything it matches`,
      );
    }
    const rule = mergeRule(cx, d, head, body, defaults, envBaseUrl);
    if (rule) rules.push(rule);
  }

  if (diagnostics.length > 0 || !providerName || syntax === undefined)
    return { provider: undefined, diagnostics };
  const baseUrlSettings = cx.baseUrlOverridden ? [] : [...cx.baseUrlSettings];
  return {
    provider: {
      name: providerName,
      file,
      syntax,
      rules,
      ...(baseUrlSettings.length > 0 ? { baseUrlSettings } : {}),
    },
    diagnostics,
  };
}

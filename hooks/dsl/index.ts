// Public entry of the provider DSL: compile one provider file, load a folder of them, pick the rule for a
// request, print diagnostics. See docs/dsl.md for the language.

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errorText } from '../../common/errors.ts';
import type { ApiName } from '../../common/types.ts';
import { REALTIME_TRANSLATORS, TRANSFORMS, TRANSLATORS, USAGE_PRESETS } from '../families/index.ts';
import { type CompileOptions, compileAst } from './compiler.ts';
import { parse } from './parser.ts';
import type { CompiledProvider, CompiledRule, DslDiagnostic, DslRegistries } from './types.ts';

export { baseUrlEnvName, normalizeBaseUrl } from './compile-blocks.ts';
export { USAGE_FIELDS } from './compile-body.ts';
export type { CompileOptions } from './compiler.ts';
export { SYNTAX_VERSION } from './compiler.ts';
export { compileJsonPath, jsonDelete, jsonGet, jsonSet, parseJsonPath } from './json-path.ts';
export { parse } from './parser.ts';
export { print } from './printer.ts';
export {
  compileTemplate,
  constantTemplate,
  type ProviderSettings,
  providerSettingEnvName,
  renderTemplate,
  TEMPLATE_VARIABLES,
  type TemplateVars,
} from './template.ts';

/**
 * The translator, transform and usage preset names the gateway implements: the wire families'
 * (hooks/families/index.ts).
 */
export const DEFAULT_REGISTRY_NAMES = {
  translators: [...TRANSLATORS.keys()],
  transforms: [...TRANSLATORS.keys(), ...TRANSFORMS.keys()],
  usagePresets: [...USAGE_PRESETS.keys()],
  realtimeTranslators: [...REALTIME_TRANSLATORS.keys()],
} as const satisfies Record<keyof DslRegistries, readonly string[]>;

/** DEFAULT_REGISTRY_NAMES as the sets the compiler takes. */
export function defaultRegistries(): DslRegistries {
  return {
    translators: new Set(DEFAULT_REGISTRY_NAMES.translators),
    transforms: new Set(DEFAULT_REGISTRY_NAMES.transforms),
    usagePresets: new Set(DEFAULT_REGISTRY_NAMES.usagePresets),
    realtimeTranslators: realtimeTranslatorApis(),
  };
}

/** Each realtime translator's name with the api of its clients, as the compiler takes them. */
export function realtimeTranslatorApis(): ReadonlyMap<string, ApiName> {
  return new Map([...REALTIME_TRANSLATORS.values()].map((t) => [t.name, t.from] as const));
}

function byPosition(a: DslDiagnostic, b: DslDiagnostic): number {
  return a.file.localeCompare(b.file) || a.line - b.line || a.col - b.col;
}

/**
 * Parses and compiles one provider file. `provider` is undefined whenever there is any diagnostic;
 * diagnostics are sorted by position. When `file` ends in `.conf`, its base name must equal the
 * provider name. Never throws.
 */
export function compileProviderSource(
  file: string,
  source: string,
  opts: CompileOptions,
): { provider: CompiledProvider | undefined; diagnostics: DslDiagnostic[] } {
  const parsed = parse(file, source);
  const compiled = compileAst(file, parsed.ast, opts);
  const diagnostics = [...parsed.diagnostics, ...compiled.diagnostics].sort(byPosition);
  return { provider: diagnostics.length === 0 ? compiled.provider : undefined, diagnostics };
}

/**
 * Compiles every `<name>.conf` in `dir` (other files are ignored). Providers with diagnostics are left
 * out of the map; an unreadable folder or file is itself a diagnostic at 1:1.
 */
export async function loadProviderDir(
  dir: string,
  opts: CompileOptions,
): Promise<{ providers: Map<string, CompiledProvider>; diagnostics: DslDiagnostic[] }> {
  const providers = new Map<string, CompiledProvider>();
  const diagnostics: DslDiagnostic[] = [];
  let names: string[];
  try {
    names = (await readdir(dir, { withFileTypes: true }))
      .filter((e) => e.name.endsWith('.conf') && !e.isDirectory())
      .map((e) => e.name)
      .sort();
  } catch (e) {
    const reason = (e as NodeJS.ErrnoException).code ?? errorText(e);
    diagnostics.push({ file: dir, line: 1, col: 1, message: `cannot read the provider folder (${reason})` });
    return { providers, diagnostics };
  }
  for (const name of names) {
    const file = join(dir, name);
    let source: string;
    try {
      source = await readFile(file, 'utf8');
    } catch (e) {
      const reason = (e as NodeJS.ErrnoException).code ?? errorText(e);
      diagnostics.push({ file, line: 1, col: 1, message: `cannot read the provider file (${reason})` });
      continue;
    }
    const r = compileProviderSource(file, source, opts);
    diagnostics.push(...r.diagnostics);
    if (r.provider) providers.set(r.provider.name, r.provider);
  }
  return { providers, diagnostics };
}

/**
 * The rule for a request: the first, top to bottom, whose api equals `api`, whose stream flag (when
 * the rule has one) equals `stream` and whose model glob (when it has one) matches the upstream model.
 * undefined means the request gets HTTP 400 no_matching_rule.
 */
export function matchRule(
  provider: CompiledProvider,
  api: ApiName,
  stream: boolean,
  model?: string,
): CompiledRule | undefined {
  for (const rule of provider.rules) {
    if (rule.api !== api || (rule.stream !== undefined && rule.stream !== stream)) continue;
    if (rule.modelMatch !== undefined && (model === undefined || !rule.modelMatch.test(model))) continue;
    return rule;
  }
  return undefined;
}

/** `file:line:col: message`, the shape editors and CI annotators understand. */
export function formatDiagnostic(d: DslDiagnostic): string {
  return `${d.file}:${d.line}:${d.col}: ${d.message}`;
}

// Loads the main configuration file into a RouterConfig, once per start or reload:
//   YAML (with positions) -> ${ENV} interpolation -> ROUTER_* overrides -> caller overrides
//   -> JSON Schema (defaults filled) -> cross-field checks -> paths resolved -> models and keys files
//   and the store's TLS files.
// Every problem is a ConfigDiagnostic (`file:line:col: message`) and none of them prints a value, so
// the output of `router -t` is safe to paste into a ticket.

import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { ConfigDiagnostic, ModelRegistryConfig, RouterConfig } from '../common/config-types.ts';
import { isPlainObject, parseYaml } from '../common/yaml-source.ts';
import { checkCrossFields, checkKeysAgainstConfig, readStoreTlsFiles, reporter } from './cross-checks.ts';
import { applyEnvOverrides, applyObjectOverrides, type ConfigOverrides } from './env-overrides.ts';
import { type Env, interpolateDocument } from './interpolate.ts';
import { loadKeysFile } from './keys.ts';
import { loadModelsFile } from './models.ts';
import { type RawConfig, toConfig } from './raw-config.ts';
import schema from './schema.json' with { type: 'json' };
import { compileSchema } from './validate.ts';

export type { ConfigOverrides } from './env-overrides.ts';

export interface LoadConfigOptions {
  /** Environment for `${ENV}` and the ROUTER_* overrides; default process.env. */
  readonly env?: Env;
  /** Highest-precedence values (CLI flags), snake_case like the file: `{ sidecar: { enabled: false } }`. */
  readonly overrides?: ConfigOverrides;
}

export interface LoadConfigResult {
  /** Undefined whenever diagnostics is not empty. */
  readonly config: RouterConfig | undefined;
  readonly diagnostics: ConfigDiagnostic[];
}

// The shape of the main file after schema validation with defaults filled in.
const validator = compileSchema(schema);

/**
 * Loads a main configuration from its text; `file` names it in diagnostics and anchors relative paths.
 * The models and keys files it names are read from disk.
 */
export async function loadConfigFromString(
  source: string,
  file: string,
  opts: LoadConfigOptions = {},
): Promise<LoadConfigResult> {
  const path = resolve(file);
  const env = opts.env ?? process.env;
  const parsed = parseYaml(source, path);
  const diagnostics = parsed.diagnostics;
  const yaml = parsed.yaml;
  if (yaml === undefined) return { config: undefined, diagnostics };
  const root = yaml.value ?? {};
  if (!isPlainObject(root)) {
    diagnostics.push(
      yaml.at('', 'the configuration must be a mapping of keys (listen, billing, store, ...)'),
    );
    return { config: undefined, diagnostics };
  }

  validator.coerceInterpolated(root, interpolateDocument(yaml, root, env, diagnostics));
  const origins = applyEnvOverrides(root, env, path, diagnostics);
  if (opts.overrides !== undefined) applyObjectOverrides(root, opts.overrides, origins);
  const schemaDiagnostics = validator.validate(root, yaml, origins);
  diagnostics.push(...schemaDiagnostics);
  const report = reporter(yaml, origins, diagnostics);
  const raw = root as unknown as RawConfig;
  if (schemaDiagnostics.length === 0) checkCrossFields(raw, report);

  // The companion files are checked even when the main file has errors, so one run shows everything.
  const dir = dirname(path);
  const modelsPath =
    typeof root.models === 'string' && root.models !== '' ? resolve(dir, root.models) : undefined;
  const keysPath = typeof root.keys === 'string' && root.keys !== '' ? resolve(dir, root.keys) : undefined;
  const models: { models: ModelRegistryConfig; diagnostics: ConfigDiagnostic[] } =
    modelsPath === undefined
      ? { models: { file: undefined, entries: [] }, diagnostics: [] }
      : await loadModelsFile(modelsPath, env);
  const keys = await loadKeysFile(keysPath, env);
  diagnostics.push(...models.diagnostics, ...keys.diagnostics);
  if (schemaDiagnostics.length === 0) checkKeysAgainstConfig(raw, keys.keys, report);
  const storeTls = schemaDiagnostics.length === 0 ? await readStoreTlsFiles(raw, dir, report) : {};

  if (diagnostics.length > 0) return { config: undefined, diagnostics };
  return { config: toConfig(raw, path, keys.keys, models.models, env, storeTls), diagnostics };
}

/** Loads and validates the main configuration file and the models and keys files it names. */
export async function loadConfig(file: string, opts: LoadConfigOptions = {}): Promise<LoadConfigResult> {
  const read = await readConfigSource(file);
  if ('diagnostics' in read) return { config: undefined, diagnostics: read.diagnostics };
  return loadConfigFromString(read.source, file, opts);
}

/** The main file's text, or why it cannot be read. */
export async function readConfigSource(
  file: string,
): Promise<{ source: string } | { diagnostics: ConfigDiagnostic[] }> {
  const path = resolve(file);
  try {
    return { source: await readFile(path, 'utf8') };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'file not found' : (code ?? 'unreadable');
    return {
      diagnostics: [{ file: path, line: 0, col: 0, message: `cannot read configuration: ${reason}` }],
    };
  }
}

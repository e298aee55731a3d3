// The model registry file (models.yaml) and its compiled, per-request form. Lookup is exact id first,
// then the longest `prefix*` pattern, so `gpt-5.5` can be listed with its own route while `gpt-*`
// catches every other GPT id without listing it.

import type { FromSchema } from 'json-schema-to-ts';
import { childPointer, displayPath } from '../common/config-diagnostics.ts';
import type {
  ConfigDiagnostic,
  ModelEntry,
  ModelRegistryConfig,
  ModelRoute,
} from '../common/config-types.ts';
import { isPlainObject, parseYaml, readYaml, type YamlFile } from '../common/yaml-source.ts';
import { type Env, interpolateDocument } from './interpolate.ts';
import schema from './models.schema.json' with { type: 'json' };
import type { MODELS_SCHEMA } from './schema-const.ts';
import { compileSchema } from './validate.ts';

export interface ModelRegistry {
  /** The entry routing `model`: the exact id, else the longest matching prefix pattern. */
  resolve(model: string): ModelEntry | undefined;
  /** Entries shown by GET /v1/models (exact ids, in file order). */
  listed(): readonly ModelEntry[];
}

export function isPattern(id: string): boolean {
  return id.endsWith('*');
}

export function compileRegistry(entries: readonly ModelEntry[]): ModelRegistry {
  const exact = new Map<string, ModelEntry>();
  const patterns: { prefix: string; entry: ModelEntry }[] = [];
  for (const entry of entries) {
    if (isPattern(entry.id)) patterns.push({ prefix: entry.id.slice(0, -1), entry });
    else if (!exact.has(entry.id)) exact.set(entry.id, entry);
  }
  // Longest prefix first; a stable sort keeps file order among equal lengths.
  patterns.sort((a, b) => b.prefix.length - a.prefix.length);
  const listed = entries.filter((entry) => entry.listed && !isPattern(entry.id));
  return {
    resolve(model) {
      const found = exact.get(model);
      if (found !== undefined) return found;
      return patterns.find(({ prefix }) => model.startsWith(prefix))?.entry;
    },
    listed: () => listed,
  };
}

/** One model of the registry file after schema validation, as a type derived from models.schema.json. */
type RawModel = NonNullable<FromSchema<typeof MODELS_SCHEMA>['models']>[string];

const validator = compileSchema(schema);

function checkId(id: string, yaml: YamlFile, pointer: string, diagnostics: ConfigDiagnostic[]): boolean {
  const star = id.indexOf('*');
  let problem: string | undefined;
  if (id.trim() === '') problem = 'a model id must not be empty';
  else if (star !== -1 && star !== id.length - 1)
    problem = `model id "${id}": "*" is only allowed once, at the end`;
  if (problem === undefined) return true;
  diagnostics.push(yaml.at(pointer, problem, 'key'));
  return false;
}

function toEntries(
  yaml: YamlFile,
  data: Record<string, unknown>,
  diagnostics: ConfigDiagnostic[],
): ModelEntry[] {
  const models = (data.models ?? {}) as Record<string, RawModel>;
  const entries: ModelEntry[] = [];
  for (const [id, raw] of Object.entries(models)) {
    const pointer = childPointer('/models', id);
    if (!checkId(id, yaml, pointer, diagnostics)) continue;
    const routes: ModelRoute[] = raw.providers.map((route) =>
      typeof route === 'string'
        ? { provider: route, model: undefined }
        : { provider: route.provider, model: route.model },
    );
    const seen = new Set<string>();
    routes.forEach((route, index) => {
      const key = `${route.provider}\u0000${route.model ?? ''}`;
      if (seen.has(key)) {
        const where = childPointer(childPointer(pointer, 'providers'), index);
        diagnostics.push(yaml.at(where, `${displayPath(where)} repeats an earlier route`));
      }
      seen.add(key);
    });
    entries.push({ id, routes, strategy: raw.strategy, ownedBy: raw.owned_by, listed: !isPattern(id) });
  }
  return entries;
}

/** Validates an already parsed models document. */
export function modelsFromYaml(
  yaml: YamlFile,
  env: Env,
): { models: ModelRegistryConfig; diagnostics: ConfigDiagnostic[] } {
  const diagnostics: ConfigDiagnostic[] = [];
  const data = yaml.value ?? {};
  if (!isPlainObject(data)) {
    diagnostics.push(yaml.at('', 'a models file must be a mapping with a "models" key'));
    return { models: { file: yaml.file, entries: [] }, diagnostics };
  }
  validator.coerceInterpolated(data, interpolateDocument(yaml, data, env, diagnostics));
  const schemaDiagnostics = validator.validate(data, yaml);
  if (schemaDiagnostics.length > 0) {
    return { models: { file: yaml.file, entries: [] }, diagnostics: [...diagnostics, ...schemaDiagnostics] };
  }
  const entries = toEntries(yaml, data, diagnostics);
  return { models: { file: yaml.file, entries }, diagnostics };
}

export function parseModelsSource(
  source: string,
  file: string,
  env: Env = {},
): { models: ModelRegistryConfig; diagnostics: ConfigDiagnostic[] } {
  const { yaml, diagnostics } = parseYaml(source, file);
  if (yaml === undefined) return { models: { file, entries: [] }, diagnostics };
  return modelsFromYaml(yaml, env);
}

/** Reads and validates a models file (`file` absolute). Trust the entries only when diagnostics is empty. */
export async function loadModelsFile(
  file: string,
  env: Env = {},
): Promise<{ models: ModelRegistryConfig; diagnostics: ConfigDiagnostic[] }> {
  const { yaml, diagnostics } = await readYaml(file, 'models file');
  if (yaml === undefined) return { models: { file, entries: [] }, diagnostics };
  return modelsFromYaml(yaml, env);
}

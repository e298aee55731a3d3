// Writes config/schema-const.ts: the configuration files' JSON Schemas (config/*.schema.json
// and schema.json, the published ones) as TypeScript constants, so each file's shape is a type derived
// from its schema. `npm run gen:config-schema` after editing a schema;
// test/config/schema-const.test.ts fails while they differ.

import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const SCHEMA_CONST = `${ROOT}config/schema-const.ts`;

/** Constant name -> schema file under config/. */
export const SCHEMAS: Readonly<Record<string, string>> = {
  ROUTER_CONFIG_SCHEMA: 'schema.json',
  MODELS_SCHEMA: 'models.schema.json',
  KEYS_SCHEMA: 'keys.schema.json',
};

export async function renderSchemaConst(): Promise<string> {
  const out = ['// Generated from config/*.schema.json by `npm run gen:config-schema`; do not edit.', ''];
  for (const [name, file] of Object.entries(SCHEMAS)) {
    const schema: unknown = JSON.parse(await readFile(`${ROOT}config/${file}`, 'utf8'));
    out.push(`export const ${name} = ${JSON.stringify(schema, null, 2)} as const;`, '');
  }
  return out.join('\n');
}

if (import.meta.main) await writeFile(SCHEMA_CONST, await renderSchemaConst());

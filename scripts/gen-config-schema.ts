// Writes proxy/config/schema-const.ts: the main configuration's JSON Schema (proxy/config/schema.json,
// the published one) as a TypeScript constant, so the file's shape is a type derived from the schema
// (proxy/config/raw-config.ts). `npm run gen:config-schema` after editing schema.json;
// test/proxy/config/schema-const.test.ts fails while the two differ.

import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const SCHEMA_JSON = `${ROOT}proxy/config/schema.json`;
export const SCHEMA_CONST = `${ROOT}proxy/config/schema-const.ts`;

export async function renderSchemaConst(): Promise<string> {
  const schema: unknown = JSON.parse(await readFile(SCHEMA_JSON, 'utf8'));
  return [
    '// Generated from proxy/config/schema.json by `npm run gen:config-schema`; do not edit.',
    '',
    `export const ROUTER_CONFIG_SCHEMA = ${JSON.stringify(schema, null, 2)} as const;`,
    '',
  ].join('\n');
}

if (import.meta.main) await writeFile(SCHEMA_CONST, await renderSchemaConst());

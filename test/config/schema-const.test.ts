// config/schema-const.ts holds the configuration schemas as TypeScript constants (the source of
// the files' types); it must be regenerated whenever a schema changes.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { KEYS_SCHEMA, MODELS_SCHEMA, ROUTER_CONFIG_SCHEMA } from '../../config/schema-const.ts';
import { renderSchemaConst, SCHEMA_CONST } from '../../scripts/gen-config-schema.ts';

test('schema-const.ts is generated from the current schemas (npm run gen:config-schema)', async () => {
  assert.equal(await readFile(SCHEMA_CONST, 'utf8'), await renderSchemaConst());
});

test('the constants are the schemas ajv validates with', async () => {
  const main = await import('../../config/schema.json', { with: { type: 'json' } });
  const models = await import('../../config/models.schema.json', { with: { type: 'json' } });
  const keys = await import('../../config/keys.schema.json', { with: { type: 'json' } });
  assert.deepEqual(ROUTER_CONFIG_SCHEMA, main.default);
  assert.deepEqual(MODELS_SCHEMA, models.default);
  assert.deepEqual(KEYS_SCHEMA, keys.default);
});

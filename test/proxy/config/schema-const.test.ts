// proxy/config/schema-const.ts is schema.json as a TypeScript constant (the source of RawConfig's type);
// it must be regenerated whenever schema.json changes.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { ROUTER_CONFIG_SCHEMA } from '../../../proxy/config/schema-const.ts';
import { renderSchemaConst, SCHEMA_CONST } from '../../../scripts/gen-config-schema.ts';

test('schema-const.ts is generated from the current schema.json (npm run gen:config-schema)', async () => {
  assert.equal(await readFile(SCHEMA_CONST, 'utf8'), await renderSchemaConst());
});

test('the constant is the schema ajv validates with', async () => {
  const { default: schema } = await import('../../../proxy/config/schema.json', { with: { type: 'json' } });
  assert.deepEqual(ROUTER_CONFIG_SCHEMA, schema);
});

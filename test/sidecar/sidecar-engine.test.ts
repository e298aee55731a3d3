// The sidecar's delivery engine follows the configuration's declared kind, not the shape of the object
// it is given: the whole configuration delivers the billing stream with store.enabled, else the outbox;
// billing alone (`kind: 'billing-only'`) delivers the stream of the store it names, else the outbox.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openOutboxWriter } from '../../billing/outbox/writer.ts';
import type { BillingConfig } from '../../common/config-types.ts';
import { loadConfigFromString } from '../../config/load.ts';
import { type BillingOnlyConfig, deliveryEngine, startSidecar } from '../../sidecar/sidecar.ts';
import { startBillingSim } from '../../sim/billing/server.ts';
import { testStoreConfig } from '../support/redis.ts';
import { makeEvent } from '../support/usage-events.ts';

async function routerConfig(rest: string) {
  const { config, diagnostics } = await loadConfigFromString(
    `listen: 127.0.0.1:0\n${rest}`,
    '/virtual/router.yaml',
    { env: {} },
  );
  assert.deepEqual(diagnostics, []);
  assert.ok(config);
  return config;
}

test('the whole configuration: the billing stream with store.enabled, else the outbox', async () => {
  const shared = await routerConfig(
    'store: { enabled: true, addr: "redis://127.0.0.1:1", access_key_hash_secret: s }\n',
  );
  assert.deepEqual(deliveryEngine(shared), { kind: 'stream', store: shared.store });
  const file = await routerConfig('store: { enabled: false, addr: "redis://127.0.0.1:1" }\n');
  assert.deepEqual(deliveryEngine(file), { kind: 'outbox' });
});

test('billing alone: the stream of the store it names, else the outbox', () => {
  const billing = {} as BillingConfig;
  const store = testStoreConfig('redis://127.0.0.1:1');
  assert.deepEqual(deliveryEngine({ kind: 'billing-only', billing, store }), { kind: 'stream', store });
  assert.deepEqual(deliveryEngine({ kind: 'billing-only', billing }), { kind: 'outbox' });
  assert.deepEqual(deliveryEngine({ kind: 'billing-only', billing, store: undefined }), { kind: 'outbox' });
});

test('billing alone with no store delivers the outbox, whatever keys the object carries', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-engine-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const sim = await startBillingSim({ apiKey: 'sk-billing-secret', projectId: 'proj_test' });
  t.after(() => sim.close());
  const writer = await openOutboxWriter(dir);
  await writer.append(makeEvent(1));
  await writer.close();
  const { billing } = await routerConfig(
    [
      'billing:',
      '  enabled: true',
      `  base_url: ${sim.url}`,
      '  project_id: proj_test',
      '  api_key: sk-billing-secret',
      '  extractor_rule_set_id: rs_router',
      `  outbox_dir: ${dir}`,
      '',
    ].join('\n'),
  );
  const config: BillingOnlyConfig = { kind: 'billing-only', billing, store: undefined };
  const sidecar = await startSidecar(config, { listen: { host: '127.0.0.1', port: 0 } });
  t.after(() => sidecar.close());
  assert.equal(sidecar.consumer, undefined);
  await sidecar.worker!.waitForDrain();
  assert.equal(sim.accepted, 1);
});

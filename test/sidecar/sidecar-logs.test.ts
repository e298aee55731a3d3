// The log of a real billing sidecar (`router-billing`): it redacts like the gateway (one shared logger,
// proxy/logger.ts), and where a secret could reach it (ingest calls refused for the billing api_key,
// webhooks with an Authorization header and a bad signature) its lines carry none: not the api_key, the
// webhook secret or the caller's bearer token.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { startGateway } from '../../proxy/gateway.ts';
import { createLogger } from '../../proxy/logger.ts';
import { startBillingSim } from '../../sim/billing/server.ts';
import { startUpstreamSim } from '../../sim/upstream/server.ts';
import { writeGatewayFiles } from '../deploy/support.ts';
import { type ChildGateway, spawnLogged, waitUntil } from '../support/billing-stack.ts';
import { ACCESS_KEY } from '../support/stack.ts';

const API_KEY = 'sk_sidecar_log_secret_4711';
const WEBHOOK_SECRET = 'whsec_sidecar_log_secret_0815';
const CALLER_TOKEN = 'caller_bearer_secret_1234';

test('the sidecar logger redacts the credential paths the gateway logger redacts', () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  const log = createLogger('router-billing', 'info', sink);
  log.info(
    {
      billing: { api_key: API_KEY, apiKey: API_KEY, webhookSecret: WEBHOOK_SECRET },
      store: { password: API_KEY },
      headers: { authorization: `Bearer ${CALLER_TOKEN}` },
      req: { headers: { authorization: `Bearer ${CALLER_TOKEN}`, 'x-api-key': CALLER_TOKEN } },
    },
    'secrets passed to a log call',
  );
  const line = JSON.parse(lines.join('')) as Record<string, Record<string, unknown>>;
  assert.equal(line.name as unknown, 'router-billing');
  assert.deepEqual(line.billing, {
    api_key: '[redacted]',
    apiKey: '[redacted]',
    webhookSecret: '[redacted]',
  });
  assert.deepEqual(line.store, { password: '[redacted]' });
  assert.deepEqual(line.headers, { authorization: '[redacted]' });
  assert.deepEqual(line.req, { headers: { authorization: '[redacted]', 'x-api-key': '[redacted]' } });
  for (const secret of [API_KEY, WEBHOOK_SECRET, CALLER_TOKEN]) assert.ok(!lines.join('').includes(secret));
});

test('a real sidecar logs refused ingest calls and refused webhooks without any secret', async (t) => {
  const upstream = await startUpstreamSim();
  // The billing service expects another key: every ingest call of the sidecar is refused (401).
  const billing = await startBillingSim({ apiKey: 'sk_the_key_billing_expects', projectId: 'proj_logs' });
  const files = await writeGatewayFiles({
    simUrl: upstream.url,
    logLevel: 'info',
    extraYaml: `billing:
  enabled: true
  base_url: ${billing.url}
  project_id: proj_logs
  api_key: ${API_KEY}
  extractor_rule_set_id: rs_router
  listen: 127.0.0.1:0
  retry_interval_ms: 20
  max_retry_interval_ms: 200
  balance_enforcement:
    enabled: true
    webhook_secret: ${WEBHOOK_SECRET}
    failure_mode: open
`,
  });
  const outbox = join(files.dir, 'outbox');
  const state = join(files.dir, 'state');
  const env = { ...files.env, ROUTER_BILLING_OUTBOX_DIR: outbox, ROUTER_BILLING_STATE_DIR: state };
  const gateway = await startGateway(files.configFile, {
    env,
    sidecar: false,
    logger: pino({ level: 'silent' }),
  });
  let sidecar: ChildGateway | undefined;
  t.after(async () => {
    sidecar?.child.kill('SIGKILL');
    await gateway.close();
    await billing.close();
    await upstream.close();
    await files.remove();
  });

  // One served request: its usage event waits in the outbox for the sidecar.
  const res = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  assert.equal(res.status, 200);
  await res.arrayBuffer();

  sidecar = await spawnLogged(
    'bin/sidecar-main.ts',
    ['-c', files.configFile],
    env,
    'router-billing listening',
  );
  const webhook = await fetch(`${sidecar.url}/internal/billing/webhook`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${CALLER_TOKEN}`,
      'content-type': 'application/json',
      'x-billing-webhook-signature': 'v1=00',
      'x-billing-webhook-timestamp': String(Math.floor(Date.now() / 1000)),
    },
    body: JSON.stringify({ id: 'evt_1', type: 'wallet.balance_changed', secret: WEBHOOK_SECRET }),
  });
  assert.equal(webhook.status, 401);
  await webhook.arrayBuffer();

  const lines = sidecar.lines;
  await waitUntil(
    () =>
      lines.some((l) => l.msg === 'webhook refused') &&
      lines.some((l) => l.msg === 'billing ingest failed' && l.status === 401),
    'the sidecar to log the refused webhook and the refused ingest call',
  );
  sidecar.child.kill('SIGTERM');
  assert.equal((await sidecar.exited).code, 0);
  const out = `${JSON.stringify(lines)}\n${sidecar.recentLog()}`;
  for (const secret of [API_KEY, WEBHOOK_SECRET, CALLER_TOKEN, ACCESS_KEY])
    assert.ok(!out.includes(secret), `the sidecar log contains ${secret}`);
  assert.ok(!/bearer /i.test(out), 'an Authorization value is in the sidecar log');
});

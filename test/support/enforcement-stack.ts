// Test support for balance enforcement end to end: the upstream simulator, the billing simulator (whose
// webhooks go to the GATEWAY's own port, through a small relay because the gateway's port is only known
// after it starts), the in-process sidecar (delivery worker + webhook listener + state notice) and the
// in-process gateway, all in file mode on a temporary directory.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { request } from 'undici';
import { loadConfig } from '../../config/load.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { type Sidecar, startSidecar } from '../../sidecar/sidecar.ts';
import { type BillingSim, startBillingSim } from '../../sim/billing/server.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { MODELS_FILE, PRICING_FILE, PROVIDERS_DIR, simProviderEnv, TRUST_LOOPBACK_IDS } from './stack.ts';

export const BILLING_API_KEY = 'sk_enforcement_billing_key';
export const PROJECT = 'proj_enf';
export const WEBHOOK_SECRET = 'whsec_enforcement_e2e';
export const WEBHOOK_PATH = '/internal/billing/webhook';
/** Subject of ACCESS_KEY (ROUTER_ACCESS_KEY_CLIENT_A): the key name. */
export const SUBJECT_A = 'client_a';
/** A second access key and subject. */
export const ACCESS_KEY_B = 'ak_test_client_b_secret';
export const SUBJECT_B = 'client_b';

export interface EnforcementStackOptions {
  readonly wallets: Readonly<Record<string, string>>;
  readonly failureMode?: 'closed' | 'open';
  readonly cacheTtlMs?: number;
  readonly deniedCacheTtlMs?: number;
  readonly requestTimeoutMs?: number;
  readonly webhookMaxBodyBytes?: number;
  /** Start the in-process sidecar (default true); false: the test runs `router-billing` itself. */
  readonly sidecar?: boolean;
  /** Shared-store mode on this Redis (redis://...); access keys still come from the environment. */
  readonly redisUrl?: string;
  /** billing.subject_type (default: left out, i.e. `api_key`). */
  readonly subjectType?: string;
  /** billing.balance_enforcement.webhook_path (default WEBHOOK_PATH). */
  readonly webhookPath?: string;
}

export interface EnforcementStack {
  readonly url: string;
  readonly webhookUrl: string;
  readonly upstream: UpstreamSim;
  readonly billing: BillingSim;
  readonly gateway: RunningGateway;
  readonly sidecar: Sidecar | undefined;
  readonly stateDir: string;
  readonly configFile: string;
  /** Environment of the gateway (access keys, provider addresses). */
  readonly env: Record<string, string>;
  /** Credit a wallet the way the business backend does: POST .../wallets/credit on the billing API. */
  credit(subjectId: string, amount: string): Promise<number>;
  close(): Promise<void>;
}

/** Forwards POSTs to `target` once it is set (the billing simulator needs a webhook URL before start). */
async function startRelay(): Promise<{ url: string; target: { url?: string }; server: Server }> {
  const target: { url?: string } = {};
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) {
        if (typeof v === 'string' && k !== 'host' && k !== 'connection') headers[k] = v;
      }
      if (target.url === undefined) {
        res.writeHead(503);
        res.end();
        return;
      }
      request(target.url, { method: 'POST', headers, body: Buffer.concat(chunks) }).then(
        async (reply) => {
          const body = Buffer.from(await reply.body.arrayBuffer());
          res.writeHead(reply.statusCode);
          res.end(body);
        },
        () => {
          res.writeHead(502);
          res.end();
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, target, server };
}

export async function startEnforcementStack(opts: EnforcementStackOptions): Promise<EnforcementStack> {
  const upstream = await startUpstreamSim();
  const relay = await startRelay();
  const webhookPath = opts.webhookPath ?? WEBHOOK_PATH;
  const billing = await startBillingSim({
    apiKey: BILLING_API_KEY,
    projectId: PROJECT,
    wallets: opts.wallets,
    webhook: { url: `${relay.url}${webhookPath}`, secret: WEBHOOK_SECRET },
  });
  const dir = await mkdtemp(join(tmpdir(), 'router-enforcement-'));
  const stateDir = join(dir, 'state');
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      `pricing: ${PRICING_FILE}`,
      'log: { level: silent }',
      TRUST_LOOPBACK_IDS,
      'billing:',
      '  enabled: true',
      `  base_url: ${billing.url}`,
      `  project_id: ${PROJECT}`,
      `  api_key: ${BILLING_API_KEY}`,
      '  extractor_rule_set_id: rs_router',
      `  outbox_dir: ${join(dir, 'outbox')}`,
      `  state_dir: ${stateDir}`,
      '  listen: 127.0.0.1:0',
      '  retry_interval_ms: 20',
      '  max_retry_interval_ms: 200',
      ...(opts.subjectType === undefined ? [] : [`  subject_type: ${opts.subjectType}`]),
      '  balance_enforcement:',
      '    enabled: true',
      `    webhook_secret: ${WEBHOOK_SECRET}`,
      `    webhook_path: ${webhookPath}`,
      `    failure_mode: ${opts.failureMode ?? 'closed'}`,
      `    cache_ttl_ms: ${opts.cacheTtlMs ?? 60_000}`,
      `    denied_cache_ttl_ms: ${opts.deniedCacheTtlMs ?? 60_000}`,
      `    request_timeout_ms: ${opts.requestTimeoutMs ?? 1000}`,
      `    webhook_max_body_bytes: ${opts.webhookMaxBodyBytes ?? 65536}`,
      ...(opts.redisUrl === undefined
        ? []
        : [
            'store:',
            '  enabled: true',
            `  addr: ${opts.redisUrl}`,
            `  key_prefix: "enf${process.pid}-${Math.random().toString(36).slice(2, 8)}:"`,
            '  access_key_hash_secret: enforcement-hash-secret',
            '  access_key_mode: file_only',
          ]),
      '',
    ].join('\n'),
  );
  // No master key here: its requests would skip the balance check these tests exercise.
  const env = simProviderEnv(upstream.url);
  delete env.ROUTER_MASTER_KEY;
  env.ROUTER_ACCESS_KEY_CLIENT_B = ACCESS_KEY_B;
  const logger = pino({ level: 'silent' });
  const loaded = await loadConfig(configFile, { env });
  if (loaded.config === undefined) throw new Error(loaded.diagnostics.map((d) => d.message).join('; '));
  let gatewayUrl: string | undefined;
  const sidecar =
    opts.sidecar === false
      ? undefined
      : await startSidecar(loaded.config, {
          logger,
          listen: { host: '127.0.0.1', port: 0 },
          worker: { pollIntervalMs: 20 },
          webhook: { gatewayUrl: () => gatewayUrl },
        });
  // The gateway forwards webhook_path to the sidecar's real address.
  if (sidecar !== undefined) env.ROUTER_BILLING_LISTEN = new URL(sidecar.url).host;
  const gateway = await startGateway(configFile, { env, sidecar: false, logger });
  gatewayUrl = gateway.url;
  relay.target.url = `${gateway.url}${webhookPath}`;

  return {
    url: gateway.url,
    webhookUrl: `${gateway.url}${webhookPath}`,
    upstream,
    billing,
    gateway,
    sidecar,
    stateDir,
    configFile,
    env,
    async credit(subjectId, amount) {
      const res = await request(`${billing.url}/v1/projects/${PROJECT}/wallets/credit`, {
        method: 'POST',
        headers: { authorization: `Bearer ${BILLING_API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          subject_type: opts.subjectType ?? 'api_key',
          subject_id: subjectId,
          amount,
          currency: 'USD',
        }),
      });
      await res.body.dump();
      return res.statusCode;
    },
    async close() {
      await gateway.close();
      await sidecar?.close();
      relay.server.closeAllConnections();
      await new Promise<void>((resolve) => relay.server.close(() => resolve()));
      await billing.close();
      await upstream.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

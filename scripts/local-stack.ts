// `npm start`: the whole product on one machine, offline, with no API keys: the gateway (with its
// billing sidecar), the upstream simulator standing in for OpenAI, Anthropic and Gemini, and the billing
// simulator standing in for the billing service. It prints a ready access key and examples to copy.
//
// Ports (env overrides): gateway ROUTER_LISTEN (127.0.0.1:8080), sidecar ROUTER_BILLING_LISTEN
// (127.0.0.1:8081), upstream simulator LOCAL_UPSTREAM_PORT (9101), billing simulator LOCAL_BILLING_PORT
// (9102) and its portal (9103). State lives in .local-stack/ (outbox, subject state, keys; ignored by git);
// delete it to start afresh.

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startGateway } from '../proxy/gateway.ts';
import { startBillingSim } from '../sim/billing/server.ts';
import { startUpstreamSim } from '../sim/upstream/server.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const stateDir = join(root, '.local-stack');
const env = process.env;
const listen = env.ROUTER_LISTEN ?? '127.0.0.1:8080';
const sidecarListen = env.ROUTER_BILLING_LISTEN ?? '127.0.0.1:8081';

async function persistentSecret(name: string, make: () => string): Promise<string> {
  const file = join(stateDir, name);
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const value = make();
  await writeFile(file, `${value}\n`, { mode: 0o600 });
  return value;
}

async function main(): Promise<void> {
  await mkdir(stateDir, { recursive: true });
  const accessKey = await persistentSecret('access-key', () => `ak_${randomBytes(32).toString('base64url')}`);
  const webhookSecret = await persistentSecret('webhook-secret', () => randomBytes(24).toString('hex'));
  const billingApiKey = 'local-billing-key';

  const upstream = await startUpstreamSim({
    port: Number(env.LOCAL_UPSTREAM_PORT ?? 9101),
    defaultChunkDelayMs: 40,
  });
  const billing = await startBillingSim({
    port: Number(env.LOCAL_BILLING_PORT ?? 9102),
    portalPort: Number(env.LOCAL_BILLING_PORTAL_PORT ?? 9103),
    apiKey: billingApiKey,
    projectId: 'proj_local',
    ruleSets: { rs_router: 'published' },
    wallets: { 'api_key:local_dev': '5.00' },
    webhook: { url: `http://${listen}/internal/billing/webhook`, secret: webhookSecret },
  });

  const configFile = join(stateDir, 'router.yaml');
  await writeFile(
    configFile,
    [
      '# Written by `npm start` (scripts/local-stack.ts); the reference configuration is deploy/config/.',
      `listen: ${listen}`,
      `providers_dir: ${join(root, 'deploy/config/providers')}`,
      `models: ${join(root, 'deploy/config/models.yaml')}`,
      `pricing: ${join(root, 'deploy/config/pricing.yaml')}`,
      'log:',
      `  level: ${env.ROUTER_LOG_LEVEL ?? 'warn'}`,
      'billing:',
      '  enabled: true',
      `  base_url: ${billing.url}`,
      '  project_id: proj_local',
      `  api_key: ${billingApiKey}`,
      '  extractor_rule_set_id: rs_router',
      `  outbox_dir: ${join(stateDir, 'outbox')}`,
      `  state_dir: ${join(stateDir, 'state')}`,
      `  listen: ${sidecarListen}`,
      '',
    ].join('\n'),
  );

  const stackEnv: Record<string, string | undefined> = { ...env, ROUTER_ACCESS_KEY_LOCAL_DEV: accessKey };
  // Every shipped provider (one <name>.conf each) points at the simulator.
  const providers = (await readdir(join(root, 'deploy/config/providers')))
    .filter((f) => f.endsWith('.conf'))
    .map((f) => f.slice(0, -'.conf'.length));
  for (const p of providers) {
    const name = p.toUpperCase().replaceAll('-', '_');
    stackEnv[`ROUTER_PROVIDER_${name}_BASE_URL`] = upstream.url;
    stackEnv[`ROUTER_PROVIDER_${name}_API_KEY`] = `sim-${p}-key`;
  }
  const gateway = await startGateway(configFile, { env: stackEnv });
  const base = gateway.url;

  console.log(`
LLM router: local stack is up (offline: upstreams and billing are simulators)

  gateway            ${base}
  upstream simulator ${upstream.url}   (OpenAI, Anthropic and Gemini wire formats)
  billing simulator  ${billing.url}   (wallet of subject api_key:local_dev holds $5.00)
  access key         ${accessKey}     (name local_dev; kept in .local-stack/access-key)

Try it:

  curl -s ${base}/v1/chat/completions -H "Authorization: Bearer ${accessKey}" \\
    -H 'content-type: application/json' \\
    -d '{"model":"gpt-5.4-mini","messages":[{"role":"user","content":"Say hello"}]}'

  curl -sN ${base}/v1/chat/completions -H "Authorization: Bearer ${accessKey}" \\
    -H 'content-type: application/json' \\
    -d '{"model":"claude-sonnet-5","stream":true,"messages":[{"role":"user","content":"Say hello"}]}'

  curl -s ${base}/v1/messages -H "x-api-key: ${accessKey}" -H 'anthropic-version: 2023-06-01' \\
    -H 'content-type: application/json' \\
    -d '{"model":"claude-haiku-5-5","max_tokens":100,"messages":[{"role":"user","content":"Say hello"}]}'

  curl -s "${base}/v1beta/models/gemini-3.8-flash:generateContent" -H "x-goog-api-key: ${accessKey}" \\
    -H 'content-type: application/json' -d '{"contents":[{"role":"user","parts":[{"text":"Say hello"}]}]}'

  curl -s ${billing.url}/v1/projects/proj_local/usage/events/details?limit=5 -H "Authorization: Bearer ${billingApiKey}"

SDKs (Node):

  import OpenAI from 'openai';
  const client = new OpenAI({ apiKey: '${accessKey}', baseURL: '${base}/v1' });
  console.log((await client.chat.completions.create({ model: 'gpt-5.4-mini',
    messages: [{ role: 'user', content: 'Say hello' }] })).choices[0].message.content);

  import Anthropic from '@anthropic-ai/sdk';
  const claude = new Anthropic({ apiKey: '${accessKey}', baseURL: '${base}' });

  import { GoogleGenAI } from '@google/genai';
  const gemini = new GoogleGenAI({ apiKey: '${accessKey}', httpOptions: { baseUrl: '${base}' } });

Ctrl-C stops everything.
`);

  let stopping = false;
  const stop = async () => {
    if (stopping) process.exit(1);
    stopping = true;
    await gateway.close();
    await billing.close();
    await upstream.close();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
}

await main();

// `npm run demo`: the whole product in about a minute, offline and self-contained (its own gateway,
// sidecar, upstream simulator and billing simulator on free ports; nothing of `npm start` is needed).
// Each step makes real calls with the official SDKs and prints what came back:
//   1. the three client families (OpenAI, Anthropic, Gemini SDKs), a stream, a tool call, a cross-family
//      call (the Anthropic SDK asking a GPT model) and a provider chosen by header;
//   2. balance enforcement: a subject with a few cents spends them, the billing service's webhook blocks
//      it (402 in the client's shape), a top-up and its webhook unblock it;
//   3. the billing service's view of the events and charges.
// Exit code 0 when every step did what it says; the test (test/scripts/demo.test.ts) runs it in CI.

import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { Decimal } from 'decimal.js';
import OpenAI from 'openai';
import type { UsageEvent } from '../billing/event/usage-event.ts';
import { errorText } from '../common/errors.ts';
import { startGateway } from '../proxy/gateway.ts';
import { startBillingSim } from '../sim/billing/server.ts';
import { startUpstreamSim } from '../sim/upstream/server.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ACCESS_KEY = 'ak_demo_team_a_secret';
const WEBHOOK_SECRET = 'whsec_demo';
const WEBHOOK_PATH = '/internal/billing/webhook';
const SUBJECT = { subject_type: 'api_key', subject_id: 'team_a' };

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolvePort(port));
    });
  });
}

/** What the billing service charges for an event: its items at the prices the event hints. */
function chargeOf(event: UsageEvent): Decimal {
  let total = new Decimal(0);
  const billing = event['x-billing'];
  for (const item of billing?.items ?? []) {
    const hint = billing?.pricing_hints?.[item.metric];
    if (hint !== undefined)
      total = total.plus(new Decimal(item.quantity).times(hint.unit_price).dividedBy(hint.pricing_unit));
  }
  return total;
}

function step(title: string): void {
  console.log(`\n== ${title}`);
}

function show(label: string, value: unknown): void {
  console.log(`  ${label.padEnd(34)} ${typeof value === 'string' ? value : JSON.stringify(value)}`);
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(`demo: ${what}`);
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'router-demo-'));
  const gatewayPort = await freePort();
  const base = `http://127.0.0.1:${gatewayPort}`;
  const upstream = await startUpstreamSim({ defaultChunkDelayMs: 5 });
  // A few cents: enough for a handful of requests at the reference prices, then the wallet runs out.
  const billing = await startBillingSim({
    apiKey: 'demo-billing-key',
    projectId: 'proj_demo',
    ruleSets: { rs_router: 'published' },
    wallets: { 'api_key:team_a': '0.0002' },
    webhook: { url: `${base}${WEBHOOK_PATH}`, secret: WEBHOOK_SECRET },
  });
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      `listen: 127.0.0.1:${gatewayPort}`,
      `providers_dir: ${join(root, 'deploy/config/providers')}`,
      `models: ${join(root, 'deploy/config/models.yaml')}`,
      `pricing: ${join(root, 'deploy/config/pricing.yaml')}`,
      'log: { level: error }',
      'billing:',
      '  enabled: true',
      `  base_url: ${billing.url}`,
      '  project_id: proj_demo',
      '  api_key: demo-billing-key',
      '  extractor_rule_set_id: rs_router',
      `  outbox_dir: ${join(dir, 'outbox')}`,
      `  state_dir: ${join(dir, 'state')}`,
      `  listen: 127.0.0.1:${await freePort()}`,
      '  retry_interval_ms: 20',
      '  balance_enforcement:',
      '    enabled: true',
      `    webhook_secret: ${WEBHOOK_SECRET}`,
      `    webhook_path: ${WEBHOOK_PATH}`,
      '',
    ].join('\n'),
  );
  const env: Record<string, string | undefined> = { ...process.env, ROUTER_ACCESS_KEY_TEAM_A: ACCESS_KEY };
  for (const f of await readdir(join(root, 'deploy/config/providers'))) {
    if (!f.endsWith('.conf')) continue;
    const name = f.slice(0, -'.conf'.length).toUpperCase().replaceAll('-', '_');
    env[`ROUTER_PROVIDER_${name}_BASE_URL`] = upstream.url;
    env[`ROUTER_PROVIDER_${name}_API_KEY`] = `sim-${name.toLowerCase()}-key`;
  }
  const gateway = await startGateway(configFile, { env });
  try {
    await run(base, billing);
  } finally {
    await gateway.close();
    await billing.close();
    await upstream.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function run(base: string, billing: Awaited<ReturnType<typeof startBillingSim>>): Promise<void> {
  const openai = new OpenAI({ apiKey: ACCESS_KEY, baseURL: `${base}/v1` });
  const claude = new Anthropic({ apiKey: ACCESS_KEY, baseURL: base });
  const gemini = new GoogleGenAI({ apiKey: ACCESS_KEY, httpOptions: { baseUrl: base } });

  step('1. Three client families, one gateway (official SDKs)');
  const chat = await openai.chat.completions.create({
    model: 'gpt-5.4-mini',
    messages: [{ role: 'user', content: 'Say hello' }],
  });
  show('OpenAI SDK, gpt-5.4-mini:', chat.choices[0]?.message.content ?? '');
  const message = await claude.messages.create({
    model: 'claude-haiku-5-5',
    max_tokens: 100,
    messages: [{ role: 'user', content: 'Say hello' }],
  });
  const text = message.content.find((b) => b.type === 'text');
  show('Anthropic SDK, claude-haiku-5-5:', text?.type === 'text' ? text.text : '');
  const answer = await gemini.models.generateContent({ model: 'gemini-3.8-flash', contents: 'Say hello' });
  show('Gemini SDK, gemini-3.8-flash:', answer.text ?? '');

  let streamed = '';
  let chunks = 0;
  const stream = await openai.chat.completions.create({
    model: 'claude-sonnet-5',
    stream: true,
    messages: [{ role: 'user', content: 'Count to five' }],
  });
  for await (const c of stream) {
    chunks++;
    streamed += c.choices[0]?.delta.content ?? '';
  }
  show(`stream, ${chunks} chunks (OpenAI SDK -> Claude):`, streamed);

  const tool = await openai.chat.completions.create({
    model: 'gpt-5.4-mini',
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools: [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      },
    ],
  });
  const call = tool.choices[0]?.message.tool_calls?.[0];
  show(
    'tool call:',
    call?.type === 'function' ? `${call.function.name}(${call.function.arguments})` : 'none',
  );
  check(call !== undefined, 'the tool call came back');

  const cross = await claude.messages.create({
    model: 'gpt-5.4-mini',
    max_tokens: 100,
    messages: [{ role: 'user', content: 'Say hello from GPT' }],
  });
  const crossText = cross.content.find((b) => b.type === 'text');
  show('Anthropic SDK asking gpt-5.4-mini:', crossText?.type === 'text' ? crossText.text : '');

  const routed = await openai.chat.completions.create(
    { model: 'my-own-model-name', messages: [{ role: 'user', content: 'Say hello' }] },
    { headers: { 'x-router-provider': 'deepseek' } },
  );
  show('x-router-provider: deepseek:', routed.choices[0]?.message.content ?? '');

  step('2. Balance enforcement: spend, blocked by webhook (402), top up, unblocked');
  show('wallet of api_key:team_a:', `$${billing.balance('api_key', 'team_a')}`);
  let served = 0;
  // Each served request is one event: the seven of step 1, then these.
  const before = 7;
  while (billing.webhooksSent.length === 0 && served < 200) {
    await openai.chat.completions.create({
      model: 'gpt-5.4',
      messages: [{ role: 'user', content: 'Write a long answer' }],
    });
    served++;
    // The sidecar delivers asynchronously; the billing service charges on ingest.
    while (billing.events.length < before + served) await new Promise((r) => setTimeout(r, 10));
  }
  check(billing.webhooksSent.length > 0, 'the wallet ran out within 200 requests');
  // The gateway has applied the block once it answered the webhook.
  const [blockedHook] = await billing.waitForWebhooks(1, 10_000);
  show('requests served before it ran out:', String(served));
  show(
    'webhook from the billing service:',
    `${blockedHook!.type} -> gateway answered ${blockedHook!.status}`,
  );
  const refused = await openai.chat.completions
    .create({ model: 'gpt-5.4', messages: [{ role: 'user', content: 'One more' }] })
    .then(
      () => undefined,
      (err: { status?: number; message?: string }) => err,
    );
  check(refused?.status === 402, 'the blocked subject got 402');
  show('the next request:', `${refused!.status} ${refused!.message ?? ''}`);
  billing.setWallet('api_key', 'team_a', '5.00', 'USD');
  const credited = await billing.sendWebhook('wallet.balance_changed', SUBJECT, {
    url: `${base}${WEBHOOK_PATH}`,
  });
  show('top-up to $5.00, webhook:', `wallet.balance_changed -> gateway answered ${credited.status}`);
  const again = await openai.chat.completions.create({
    model: 'gpt-5.4-mini',
    messages: [{ role: 'user', content: 'Am I back?' }],
  });
  show('the request after the top-up:', again.choices[0]?.message.content ?? '');

  // The last request's event, too, before the summary.
  while (billing.events.length < before + served + 1) await new Promise((r) => setTimeout(r, 10));

  step('3. What the billing service saw');
  const events = billing.events;
  let total = new Decimal(0);
  for (const [i, e] of events.entries()) {
    const usage = e.raw_json.usage;
    const charge = chargeOf(e);
    total = total.plus(charge);
    if (i < 8)
      show(
        `${e.raw_json.provider}/${e.raw_json.model}`,
        `${usage.input_tokens} in, ${usage.output_tokens} out: $${charge.toFixed(8)} (${e.subject_type}:${e.subject_id})`,
      );
  }
  show('events billed, charged in all:', `${events.length}, $${total.toFixed(8)}`);
  show('wallet of api_key:team_a now:', `$${billing.balance('api_key', 'team_a')}`);
  console.log('\nDemo complete.');
}

main().catch((err: unknown) => {
  console.error(errorText(err));
  process.exit(1);
});

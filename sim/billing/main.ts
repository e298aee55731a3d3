// `npm run billing-sim`: runs the billing service simulator until SIGINT / SIGTERM and prints its URLs.

import { parseArgs } from 'node:util';
import { handleSignals } from '../../common/signals.ts';
import { startBillingSim } from './server.ts';
import type { BillingSimOptions, RuleSetStatus } from './types.ts';

const USAGE = `usage: npm run billing-sim -- [options]
  --host <host>                 listen address (default 127.0.0.1)
  --port <n>                    API port (default 8790, 0 = free port)
  --portal-port <n>             portal port, answers HTML 404 (default 8791, 0 = free port)
  --api-key <key>               required Bearer key (default: $BILLING_SIM_API_KEY or "sim-local-key")
  --project <id>                project id (default proj_local)
  --rule-set <id>[=draft]       extractor rule set, repeatable (default rs_router)
  --rule-set-mode items|spec    what rule sets charge: every item (default) or only prompt_tokens and
                                completion_tokens, as a rule set written to the specification
  --webhook-url <url>           where to send signed webhooks
  --webhook-secret <secret>     webhook signing secret (default: $BILLING_SIM_WEBHOOK_SECRET)
  --wallet <type:id=amount>     initial wallet, repeatable (e.g. api_key:client-a=10.00)
  --threshold <amount>          send threshold_crossed when a balance falls to or below it, repeatable
  --currency <code>             wallet currency (default USD)
  --no-keep-events              count events without keeping them (benchmarks)
  --ingest-body-limit <bytes>   largest ingest body (default 1048576)
  --oversize reset|413          a larger body: drop the connection mid-upload (default) or answer 413
  --json                        print the ready line as JSON`;

function parseRuleSet(text: string): [string, RuleSetStatus] {
  const eq = text.indexOf('=');
  if (eq < 0) return [text, 'published'];
  const status = text.slice(eq + 1);
  if (status !== 'draft' && status !== 'published')
    throw new Error(`--rule-set ${text}: use <id> or <id>=draft`);
  return [text.slice(0, eq), status];
}

function parseWallet(text: string): [string, string] {
  const eq = text.lastIndexOf('=');
  if (eq <= 0) throw new Error(`--wallet ${text}: use <subject_type>:<subject_id>=<amount>`);
  return [text.slice(0, eq), text.slice(eq + 1)];
}

function parsePort(text: string | undefined, fallback: number, flag: string): number {
  if (text === undefined) return fallback;
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`${flag}: not a port: ${text}`);
  return port;
}

function optionsFromArgs(argv: string[]): { options: BillingSimOptions; json: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      'portal-port': { type: 'string' },
      'api-key': { type: 'string' },
      project: { type: 'string' },
      'rule-set': { type: 'string', multiple: true },
      'rule-set-mode': { type: 'string' },
      'webhook-url': { type: 'string' },
      'webhook-secret': { type: 'string' },
      wallet: { type: 'string', multiple: true },
      threshold: { type: 'string', multiple: true },
      currency: { type: 'string' },
      'keep-events': { type: 'boolean', default: true },
      'ingest-body-limit': { type: 'string' },
      oversize: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    allowNegative: true,
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const webhookUrl = values['webhook-url'];
  const webhookSecret = values['webhook-secret'] ?? process.env.BILLING_SIM_WEBHOOK_SECRET;
  if (webhookUrl !== undefined && !webhookSecret) throw new Error('--webhook-url needs --webhook-secret');
  const ruleSets = values['rule-set']?.length
    ? Object.fromEntries(values['rule-set'].map(parseRuleSet))
    : undefined;
  const ruleSetMode = values['rule-set-mode'];
  if (ruleSetMode !== undefined && ruleSetMode !== 'items' && ruleSetMode !== 'spec')
    throw new Error(`--rule-set-mode: items or spec, not ${ruleSetMode}`);
  const limitText = values['ingest-body-limit'];
  const ingestBodyLimitBytes = limitText === undefined ? undefined : Number(limitText);
  if (
    ingestBodyLimitBytes !== undefined &&
    !(Number.isInteger(ingestBodyLimitBytes) && ingestBodyLimitBytes > 0)
  )
    throw new Error(`--ingest-body-limit: not a positive integer: ${limitText}`);
  const oversize = values.oversize;
  if (oversize !== undefined && oversize !== 'reset' && oversize !== '413')
    throw new Error(`--oversize: reset or 413, not ${oversize}`);
  const options: BillingSimOptions = {
    host: values.host ?? '127.0.0.1',
    port: parsePort(values.port, 8790, '--port'),
    portalPort: parsePort(values['portal-port'], 8791, '--portal-port'),
    apiKey: values['api-key'] ?? process.env.BILLING_SIM_API_KEY ?? 'sim-local-key',
    projectId: values.project ?? 'proj_local',
    ruleSets,
    ruleSetMode,
    webhook:
      webhookUrl !== undefined && webhookSecret ? { url: webhookUrl, secret: webhookSecret } : undefined,
    wallets: Object.fromEntries((values.wallet ?? []).map(parseWallet)),
    thresholds: values.threshold,
    currency: values.currency,
    keepEvents: values['keep-events'],
    ingestBodyLimitBytes,
    oversize,
  };
  return { options, json: values.json };
}

async function main(): Promise<void> {
  let parsed: ReturnType<typeof optionsFromArgs>;
  try {
    parsed = optionsFromArgs(process.argv.slice(2));
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    console.error(USAGE);
    process.exit(2);
  }
  const { options, json } = parsed;
  const sim = await startBillingSim(options);
  const ruleSets = Object.entries(options.ruleSets ?? { rs_router: 'published' });
  // The API key and webhook secret are deliberately not printed.
  const ready = {
    url: sim.url,
    portal_url: sim.portalUrl,
    project_id: sim.projectId,
    rule_sets: Object.fromEntries(ruleSets),
    ingest_url: `${sim.url}/v1/projects/${sim.projectId}/extractor-rule-sets/${ruleSets[0]?.[0] ?? '<rule_set_id>'}/events/ingest`,
    webhook_url: options.webhook?.url ?? null,
  };
  if (json) {
    console.log(JSON.stringify(ready));
  } else {
    console.log(`billing simulator listening on ${ready.url} (portal ${ready.portal_url})`);
    console.log(
      `  project ${ready.project_id}, rule sets ${ruleSets.map(([id, s]) => `${id}=${s}`).join(', ')}`,
    );
    console.log(`  ingest  ${ready.ingest_url}`);
    console.log(
      `  webhooks ${ready.webhook_url ?? 'not sent (no --webhook-url)'}; state: GET ${ready.url}/_sim/state`,
    );
  }
  handleSignals({ stop: () => sim.close() });
}

await main();

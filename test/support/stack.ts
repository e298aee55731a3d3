// Test support: an upstream simulator and an in-process gateway with a temporary configuration, wired
// the way an operator would (provider base URLs and keys through ROUTER_* env). Tests get a base URL,
// an access key and the simulator; close() tears everything down so the test process exits.

import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Logger, pino } from 'pino';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim, type UpstreamSimOptions } from '../../sim/upstream/server.ts';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const PROVIDERS_DIR = join(ROOT, 'deploy/config/providers');
export const MODELS_FILE = join(ROOT, 'deploy/config/models.yaml');
export const PRICING_FILE = join(ROOT, 'deploy/config/pricing.yaml');

/**
 * Test configurations trust loopback callers' X-Router-Request-Id, standing in for an ingress that
 * sends unique ids, so tests can name the events they look for. The default (trust nobody) has its
 * own tests in test/e2e/request-id-trust.test.ts.
 */
export const TRUST_LOOPBACK_IDS = 'request_id: { trusted_sources: ["127.0.0.1", "::1"] }';

export const ACCESS_KEY = 'ak_test_client_a_secret';
export const MASTER_KEY = 'mk_test_master_secret';

export const SHIPPED_PROVIDERS = [
  'openai',
  'anthropic',
  'gemini',
  'azure-openai',
  'deepseek',
  'groq',
  'mistral',
  'openrouter',
  'together',
  'xai',
  'ollama',
  'vllm',
];

export interface StackOptions {
  /** Extra YAML appended to the main configuration. */
  readonly extraYaml?: string;
  /** Extra provider files (name -> DSL source) placed beside copies of the shipped ones. */
  readonly providers?: Readonly<Record<string, string>>;
  /** Files copied unchanged into the providers folder (a provider file and the hook module beside it). */
  readonly providerFiles?: readonly string[];
  /** Replace the model registry (YAML text). */
  readonly modelsYaml?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly sim?: UpstreamSimOptions;
  /** Point these providers at this URL instead of the simulator. */
  readonly baseUrls?: Readonly<Record<string, string>>;
  /** Trust loopback callers' request ids (default true, TRUST_LOOPBACK_IDS). */
  readonly trustCallerIds?: boolean;
  /** The gateway's logger (default: silent). */
  readonly logger?: Logger;
  /**
   * More environment made once the simulator runs (a service account file whose token_uri is the
   * simulator's), in the stack's temporary directory.
   */
  readonly simEnv?: (sim: UpstreamSim, dir: string) => Promise<Readonly<Record<string, string>>>;
}

export interface Stack {
  readonly url: string;
  readonly sim: UpstreamSim;
  readonly gateway: RunningGateway;
  readonly dir: string;
  readonly env: Record<string, string>;
  close(): Promise<void>;
}

export function envName(provider: string): string {
  return provider.toUpperCase().replaceAll('-', '_');
}

/**
 * The environment an operator would give a gateway in front of the simulator: the test access key, the
 * master key, and for every shipped provider (plus `extraProviders`) a base URL and an upstream key
 * `sim-<provider>-key`. `baseUrls` points single providers elsewhere.
 */
export function simProviderEnv(
  simUrl: string,
  extraProviders: readonly string[] = [],
  baseUrls: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {
    ROUTER_ACCESS_KEY_CLIENT_A: ACCESS_KEY,
    ROUTER_MASTER_KEY: MASTER_KEY,
  };
  for (const p of new Set([...SHIPPED_PROVIDERS, ...extraProviders])) {
    env[`ROUTER_PROVIDER_${envName(p)}_BASE_URL`] = baseUrls[p] ?? simUrl;
    env[`ROUTER_PROVIDER_${envName(p)}_API_KEY`] = `sim-${p}-key`;
  }
  return env;
}

export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const sim = await startUpstreamSim(opts.sim);
  const dir = await mkdtemp(join(tmpdir(), 'router-test-'));
  let providersDir = PROVIDERS_DIR;
  if (opts.providers !== undefined || opts.providerFiles !== undefined) {
    providersDir = join(dir, 'providers');
    await mkdir(providersDir);
    const { readdir, copyFile } = await import('node:fs/promises');
    for (const f of await readdir(PROVIDERS_DIR))
      await copyFile(join(PROVIDERS_DIR, f), join(providersDir, f));
    for (const [name, src] of Object.entries(opts.providers ?? {}))
      await writeFile(join(providersDir, `${name}.conf`), src);
    for (const file of opts.providerFiles ?? []) await copyFile(file, join(providersDir, basename(file)));
  }
  let modelsFile = MODELS_FILE;
  if (opts.modelsYaml !== undefined) {
    modelsFile = join(dir, 'models.yaml');
    await writeFile(modelsFile, opts.modelsYaml);
  }
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${providersDir}`,
      `models: ${modelsFile}`,
      `pricing: ${PRICING_FILE}`,
      'log: { level: silent }',
      opts.trustCallerIds === false ? '' : TRUST_LOOPBACK_IDS,
      opts.extraYaml ?? '',
    ].join('\n'),
  );
  const extraProviders = [
    ...Object.keys(opts.providers ?? {}),
    ...(opts.providerFiles ?? []).filter((f) => f.endsWith('.conf')).map((f) => basename(f, '.conf')),
  ];
  const env = simProviderEnv(sim.url, extraProviders, opts.baseUrls);
  Object.assign(env, opts.env);
  let gateway: RunningGateway;
  try {
    if (opts.simEnv !== undefined) Object.assign(env, await opts.simEnv(sim, dir));
    gateway = await startGateway(configFile, {
      env,
      sidecar: false,
      logger: opts.logger ?? pino({ level: 'silent' }),
    });
  } catch (err) {
    // Leave nothing running, or the test process would never exit.
    await sim.close();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url: gateway.url,
    sim,
    gateway,
    dir,
    env,
    async close() {
      await gateway.close();
      await sim.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** POST JSON to the gateway with the test access key; returns status, headers and parsed body. */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: unknown; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

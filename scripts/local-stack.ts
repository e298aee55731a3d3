// `npm start`: the whole product on one machine, offline, with no API keys: the gateway (with its
// billing sidecar), the upstream simulator standing in for OpenAI, Anthropic and Gemini, and the billing
// simulator standing in for the billing service. It prints a ready access key and examples to copy.
//
// Ports (env overrides): gateway ROUTER_LISTEN (127.0.0.1:8080), sidecar ROUTER_BILLING_LISTEN
// (127.0.0.1:8081), upstream simulator LOCAL_UPSTREAM_PORT (9101), billing simulator LOCAL_BILLING_PORT
// (9102) and its portal LOCAL_BILLING_PORTAL_PORT (9103). A port in use is one line naming its variable,
// exit 1; a malformed variable, exit 2 (common/exit-codes.ts). State lives in LOCAL_STACK_DIR
// (.local-stack/: outbox, subject state, keys; ignored by git); delete it to start afresh.
//
// Stopping (common/signals.ts): SIGINT (Ctrl-C), SIGTERM or SIGHUP close everything (the gateway stops
// its sidecar) and exit 0; a second signal a second or more later exits 1 at once. npm may end without
// telling this process (SIGTERM to npm kills only the shell between them; SIGKILL tells no one):
// scripts/parent-watch.ts notices and stops the stack the same way. Killed itself, even by SIGKILL, its sidecar follows (its stdin pipe closes) and the
// simulators, which run in this process, are gone with it.

import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorText } from '../common/errors.ts';
import { EXIT, type ExitCode } from '../common/exit-codes.ts';
import { handleSignals } from '../common/signals.ts';
import { formatListenAddress, parseListenAddress } from '../config/listen.ts';
import { ConfigError, startGateway } from '../proxy/gateway.ts';
import { startBillingSim } from '../sim/billing/server.ts';
import { startUpstreamSim } from '../sim/upstream/server.ts';
import { watchLauncher } from './parent-watch.ts';
import { quickstartExamples, renderQuickstart } from './quickstart-examples.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const env = process.env;
const stateDir = env.LOCAL_STACK_DIR ? resolve(env.LOCAL_STACK_DIR) : join(root, '.local-stack');

/** A problem the user fixes: one line on stderr; a port in use fails (1), a malformed variable is usage (2). */
class StartError extends Error {
  readonly exitCode: ExitCode;
  constructor(message: string, exitCode: ExitCode = EXIT.failed) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** A listener of the stack and the variable that moves it (docs/configuration.md). */
interface Listener {
  readonly what: string;
  readonly variable: string;
  readonly host: string;
  readonly port: number;
  /** What the variable holds. */
  readonly holds: 'port' | 'host:port';
}

function portFrom(variable: string, fallback: number, what: string): Listener {
  const text = env[variable] ?? String(fallback);
  if (!/^[0-9]{1,5}$/.test(text) || Number(text) > 65535)
    throw new StartError(`${variable} must be a port number (0-65535), not "${text}"`, EXIT.usage);
  return { what, variable, host: '127.0.0.1', port: Number(text), holds: 'port' };
}

function addressFrom(variable: string, fallback: string, what: string): Listener {
  const text = env[variable] ?? fallback;
  const address = parseListenAddress(text);
  if (address === undefined) throw new StartError(`${variable} must be host:port, not "${text}"`, EXIT.usage);
  return { what, variable, ...address, holds: 'host:port' };
}

function listenProblem(l: Listener, err: NodeJS.ErrnoException): string {
  const where = `${formatListenAddress(l)} (${l.what})`;
  if (err.code === 'EADDRINUSE')
    return `${where} is already in use (another \`npm start\` still running?): set ${l.variable} to a free ${l.holds}`;
  return `cannot listen on ${where}: ${err.code ?? err.message}: set ${l.variable} to another ${l.holds}`;
}

/** Fails with the one line when a listener's address cannot be bound now (port 0 always can). */
async function assertFree(l: Listener): Promise<void> {
  if (l.port === 0) return;
  const server = createServer();
  try {
    await new Promise<void>((done, fail) => {
      server.once('error', fail);
      server.listen({ host: l.host, port: l.port, exclusive: true }, () => server.close(() => done()));
    });
  } catch (err) {
    throw new StartError(listenProblem(l, err as NodeJS.ErrnoException));
  }
}

/** Runs a start step; its listen error (taken between the check and the bind) becomes the one line. */
async function listening<T>(listeners: readonly Listener[], start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { port?: number };
    const l = e.syscall === 'listen' ? (listeners.find((x) => x.port === e.port) ?? listeners[0]) : undefined;
    throw l === undefined ? err : new StartError(listenProblem(l, e));
  }
}

/** A path as the user would type it from here: relative when under the current folder. */
function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel.startsWith('..') || isAbsolute(rel) ? path : rel;
}

async function persistentSecret(name: string, make: () => string): Promise<string> {
  const file = join(stateDir, name);
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const value = make();
  await writeFile(file, `${value}\n`, { mode: 0o600 });
  return value;
}

/** What is running, closed last-started first when the stack stops. */
const running: { name: string; close(): Promise<void> }[] = [];
let startup: Promise<void> = Promise.resolve();
let stopping = false;

/** Lets a start in progress finish and closes everything that started; rejects when a close failed. */
async function closeAll(why: string): Promise<void> {
  stopping = true;
  console.log(`\nStopping the local stack (${why})...`);
  // Bounded even if a close hangs (the gateway's own drain gives up after limits.drain_timeout_ms).
  setTimeout(() => {
    console.error('npm start: still stopping after 60 s: exiting');
    process.exit(EXIT.failed);
  }, 60_000).unref();
  await startup.catch(() => undefined);
  let failed = false;
  for (let r = running.pop(); r !== undefined; r = running.pop()) {
    try {
      await r.close();
    } catch (err) {
      console.error(`npm start: closing the ${r.name} failed: ${errorText(err)}`);
      failed = true;
    }
  }
  console.log('Local stack stopped.');
  if (failed) throw new Error('a close failed');
}

async function main(): Promise<void> {
  // SIGHUP (the terminal closed) stops it too: there is nothing to reload.
  const stop = handleSignals({
    stop: closeAll,
    note: (what, signal) => {
      if (what === 'forced') console.error(`npm start: ${signal} again: exiting at once`);
    },
  });
  watchLauncher(() => void stop('the npm process that started it is gone'));
  // Whoever reads the output may be gone too (a closed terminal, a killed pipe reader): keep stopping.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});

  const gatewayListener = addressFrom('ROUTER_LISTEN', '127.0.0.1:8080', 'gateway');
  const sidecarListener = addressFrom('ROUTER_BILLING_LISTEN', '127.0.0.1:8081', 'billing sidecar');
  const upstreamListener = portFrom('LOCAL_UPSTREAM_PORT', 9101, 'upstream simulator');
  const billingListener = portFrom('LOCAL_BILLING_PORT', 9102, 'billing simulator');
  const portalListener = portFrom('LOCAL_BILLING_PORTAL_PORT', 9103, 'billing simulator portal');
  // Every address is checked before anything starts: the sidecar is a child that would otherwise
  // retry its bind forever, and a half-started stack is no use.
  for (const l of [gatewayListener, sidecarListener, upstreamListener, billingListener, portalListener])
    await assertFree(l);
  const listen = formatListenAddress(gatewayListener);
  const sidecarListen = formatListenAddress(sidecarListener);

  await mkdir(stateDir, { recursive: true });
  const accessKey = await persistentSecret('access-key', () => `ak_${randomBytes(32).toString('base64url')}`);
  const webhookSecret = await persistentSecret('webhook-secret', () => randomBytes(24).toString('hex'));
  const billingApiKey = 'local-billing-key';

  const upstream = await listening([upstreamListener], () =>
    startUpstreamSim({ port: upstreamListener.port, defaultChunkDelayMs: 40 }),
  );
  running.push({ name: 'upstream simulator', close: () => upstream.close() });
  const billing = await listening([billingListener, portalListener], () =>
    startBillingSim({
      port: billingListener.port,
      portalPort: portalListener.port,
      apiKey: billingApiKey,
      projectId: 'proj_local',
      ruleSets: { rs_router: 'published' },
      wallets: { 'api_key:local_dev': '5.00' },
      webhook: { url: `http://${listen}/internal/billing/webhook`, secret: webhookSecret },
    }),
  );
  running.push({ name: 'billing simulator', close: () => billing.close() });

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
  // Vertex AI, offline too: a service account the simulator issues access tokens to, and a location.
  const vertexKey = join(stateDir, 'vertex-sa.json');
  await upstream.auth.writeServiceAccountFile(vertexKey, { project: 'local-project' });
  stackEnv.GOOGLE_APPLICATION_CREDENTIALS = vertexKey;
  stackEnv.ROUTER_PROVIDER_VERTEX_LOCATION = 'us-east5';
  const gateway = await listening([gatewayListener], () => startGateway(configFile, { env: stackEnv }));
  running.push({ name: 'gateway', close: () => gateway.close() });
  const base = gateway.url;
  if (stopping) return;

  console.log(`
LLM router: local stack is up (offline: upstreams and billing are simulators)

  gateway            ${base}
  upstream simulator ${upstream.url}   (OpenAI, Anthropic and Gemini wire formats; Vertex AI for
                     Claude ids with a version, claude-sonnet-5@20261001)
  billing simulator  ${billing.url}   (wallet of subject api_key:local_dev holds $5.00)
  access key         ${accessKey}     (name local_dev; kept in ${shown(join(stateDir, 'access-key'))})

Try it (paste into a shell in this folder; each makes a call and prints its answer):

${renderQuickstart(
  quickstartExamples({ base, accessKey, billingUrl: billing.url, billingApiKey, project: 'proj_local' }),
)}
The balance walk-through (a wallet runs out: 402, the billing webhook, a top-up): npm run demo

Ctrl-C stops everything.
`);
}

startup = main();
startup.catch((err: unknown) => {
  if (stopping) return;
  console.error(err instanceof StartError || err instanceof ConfigError ? `npm start: ${err.message}` : err);
  // The sidecar, if it started, follows through its pipe; the simulators end with this process.
  process.exit(
    err instanceof StartError ? err.exitCode : err instanceof ConfigError ? EXIT.usage : EXIT.failed,
  );
});

// The processes under test and their helpers: the upstream simulator, the billing simulator, nginx,
// Portkey's gateway, redis and the gateway in its variants. Each runs in its own process, on a free
// port, with its files in the bench's temporary folder.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { sidecarLauncher } from '../../proxy/sidecar-supervisor.ts';

export { SIDECAR_V8_FLAGS } from '../../proxy/sidecar-supervisor.ts';
/** V8 flags of the gateway, as `router` (bin/router.js) and router.service give them. */
export const GATEWAY_V8_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

import { freePort, type Service, startService, waitForHttp } from './proc.ts';

const run = promisify(execFile);

export type PeerId =
  | 'direct'
  | 'nginx'
  | 'gateway'
  | 'gateway-billing'
  | 'gateway-redis'
  | 'portkey'
  | 'gateway-info-log'
  | 'node-floor'
  | 'gateway-2w'
  | 'gateway-traced';
/** `nginx` kind: a transparent proxy that gets the simulator's own request (node-floor is one too). */
export type PeerKind = 'direct' | 'nginx' | 'gateway' | 'portkey';

export const PEER_LABELS: Record<PeerId, string> = {
  direct: 'upstream simulator (direct)',
  nginx: 'nginx proxy_pass',
  gateway: 'gateway, file mode, billing off',
  'gateway-billing': 'gateway, file mode, billing on',
  'gateway-redis': 'gateway, Redis mode, billing on',
  portkey: 'Portkey gateway',
  'gateway-info-log': 'gateway, billing off, info-level access log',
  'node-floor': 'bare Node forwarder (floor)',
  'gateway-2w': 'gateway, 2 workers, file mode, billing off',
  'gateway-traced': 'gateway, billing off, traces exported (sampling 1.0)',
};

export interface Peer {
  id: PeerId;
  kind: PeerKind;
  origin: string;
  /** The process whose resources are measured (with its children). */
  service: Service;
}

export interface Unavailable {
  id: PeerId;
  reason: string;
}

/** Upstream credentials the simulators accept; the gateway's own client key. */
export const SIM_KEY = 'sim-bench-key';
export const BENCH_ACCESS_KEY = 'bench-access-key-0123456789';
const BILLING_KEY = 'bench-billing-key';
const BILLING_PROJECT = 'proj_bench';
const BILLING_RULE_SET = 'rs_router';

/** Portkey's release and the @hono/node-server it is pinned to: newer node-server releases make its
 * streaming path throw `TypeError: immutable` (Portkey-AI/gateway issues 1389 and 1550). */
export const PORTKEY_VERSION = '1.15.2';
const PORTKEY_HONO_NODE_SERVER = '1.13.8';

export interface Workspace {
  repo: string;
  tmp: string;
  /** Extra node flags for gateway processes (--cpu-prof ...). */
  gatewayNodeFlags: (variant: PeerId) => string[];
  /** Extra node flags for the billing sidecar a gateway supervises (ROUTER_SIDECAR_NODE_FLAGS). */
  sidecarNodeFlags: (name: string) => string[];
  /** A command the gateway's node runs under (valgrind ...), and how long its start may then take. */
  gatewayLauncher?: { command: readonly string[]; startTimeoutMs: number };
}

function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('ROUTER_') && k !== 'NODE_OPTIONS') env[k] = v;
  }
  return env;
}

function logFile(ws: Workspace, name: string): string {
  return join(ws.tmp, `${name}.log`);
}

export interface UpstreamSimProcess {
  url: string;
  service: Service;
}

export async function startUpstreamSimProcess(ws: Workspace): Promise<UpstreamSimProcess> {
  const port = await freePort();
  const service = startService(
    'upstream-sim',
    process.execPath,
    [join(ws.repo, 'sim/upstream/main.ts'), '--port', String(port), '--host', '127.0.0.1', '--no-record'],
    { env: cleanEnv(), logFile: logFile(ws, 'upstream-sim') },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/v1/models`, service);
  return { url, service };
}

export interface BillingSimProcess {
  url: string;
  service: Service;
}

export async function startBillingSimProcess(
  ws: Workspace,
  name = 'billing-sim',
): Promise<BillingSimProcess> {
  const [port, portal] = [await freePort(), await freePort()];
  const service = startService(
    name,
    process.execPath,
    [
      join(ws.repo, 'sim/billing/main.ts'),
      '--port',
      String(port),
      '--portal-port',
      String(portal),
      '--api-key',
      BILLING_KEY,
      '--project',
      BILLING_PROJECT,
      '--rule-set',
      BILLING_RULE_SET,
      '--no-keep-events',
    ],
    { env: cleanEnv(), logFile: logFile(ws, name) },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(`${url}/_sim/state`, service);
  // The billing service is a remote system in production; here it shares the two cores, so it runs at
  // the lowest priority, the CPU policy `router` gives its sidecar (SCHED_IDLE through chrt when present,
  // then nice 19), and its CPU comes out of idle time rather than out of the peer being measured. Only
  // once it answers: started at that priority on a busy machine, it never got the CPU to start.
  const [chrt] = sidecarLauncher({});
  if (chrt !== undefined) {
    await run(chrt, ['--all-tasks', '--idle', '--pid', '0', String(service.pid)]).catch(() => undefined);
  }
  try {
    setPriority(service.pid, 19);
  } catch {
    // not permitted: measured at normal priority (noted by the machine section)
  }
  return { url, service };
}

export interface GatewayVariant {
  id: PeerId;
  billing?: { url: string };
  redisUrl?: string;
  logLevel?: 'warn' | 'info';
  /** Billing on but no sidecar (events stay in the outbox): the serving path's own share of billing. */
  noSidecar?: boolean;
  /** `billing.outbox_fsync_interval_ms` (default: the gateway's own). */
  outboxFsyncIntervalMs?: number;
  /** `workers:` of the configuration (default 1). */
  workers?: number;
  /** OTLP/HTTP traces endpoint: tracing on (every request sampled unless tracesSampler says otherwise). */
  tracesUrl?: string;
  /** OTEL_TRACES_SAMPLER of a traced gateway (default always_on). */
  tracesSampler?: string;
  /** With redisUrl: a Redis Cluster (redisUrl lists its seeds), the billing stream's shards, and
   * `store.operation_timeout_ms` (a gateway under valgrind needs far more than the default). */
  store?: { cluster?: boolean; shards?: number; operationTimeoutMs?: number };
  /** Every key limited (rate_limits.per_key) by limits the load never reaches: the admission's cost. */
  rateLimits?: boolean;
  /** The openai provider signs with SigV4 (auth_sigv4 "bedrock") instead of sending its key. */
  sigv4?: boolean;
}

/** The main configuration as JSON (a YAML subset), every path absolute. */
export async function writeGatewayConfig(
  ws: Workspace,
  name: string,
  opts: {
    listenPort: number;
    billingUrl?: string;
    redisUrl?: string;
    /** With redisUrl: `store.cluster` (redisUrl then lists the seeds), `store.billing_stream_shards`,
     * `store.operation_timeout_ms`. */
    store?: { cluster?: boolean; shards?: number; operationTimeoutMs?: number };
    logLevel?: string;
    sidecarPort?: number;
    noSidecar?: boolean;
    outboxFsyncIntervalMs?: number;
    workers?: number;
    rateLimits?: boolean;
    sigv4?: boolean;
  },
): Promise<string> {
  const dir = join(ws.tmp, name);
  await mkdir(dir, { recursive: true });
  let providersDir = join(ws.repo, 'deploy/config/providers');
  if (opts.sigv4 === true) providersDir = await sigv4Providers(providersDir, join(dir, 'providers'));
  const config: Record<string, unknown> = {
    listen: `127.0.0.1:${opts.listenPort}`,
    // Left out unless given (the default is 1): checkouts older than the key refuse it.
    ...(opts.workers === undefined ? {} : { workers: opts.workers }),
    providers_dir: providersDir,
    models: join(ws.repo, 'deploy/config/models.yaml'),
    log: { level: opts.logLevel ?? 'warn' },
    sidecar: { enabled: opts.billingUrl !== undefined && opts.noSidecar !== true },
    billing:
      opts.billingUrl === undefined
        ? { enabled: false }
        : {
            enabled: true,
            base_url: opts.billingUrl,
            project_id: BILLING_PROJECT,
            api_key: BILLING_KEY,
            extractor_rule_set_id: BILLING_RULE_SET,
            outbox_dir: join(dir, 'outbox'),
            ...(opts.outboxFsyncIntervalMs === undefined
              ? {}
              : { outbox_fsync_interval_ms: opts.outboxFsyncIntervalMs }),
            listen: `127.0.0.1:${opts.sidecarPort ?? (await freePort())}`,
          },
  };
  if (opts.redisUrl !== undefined) {
    config.store = {
      enabled: true,
      addr: opts.redisUrl,
      access_key_hash_secret: 'bench-hash-secret-0123456789',
      key_prefix: `bench-${name}:`,
      ...(opts.store?.cluster === undefined ? {} : { cluster: opts.store.cluster }),
      ...(opts.store?.shards === undefined ? {} : { billing_stream_shards: opts.store.shards }),
      ...(opts.store?.operationTimeoutMs === undefined
        ? {}
        : { operation_timeout_ms: opts.store.operationTimeoutMs }),
    };
  }
  if (opts.rateLimits === true) {
    config.rate_limits = {
      per_key: {
        // A large tenant's limits, far above the load. Above 2^30 V8 keeps a number as a heap object, so
        // every count and header value of such a limit allocates (docs/benchmarks.md section 14).
        requests_per_minute: 100_000_000,
        tokens_per_minute: 1_000_000_000,
        max_concurrent: 100_000,
      },
    };
  }
  const file = join(dir, 'router.yaml');
  await writeFile(file, `${JSON.stringify(config, null, 2)}\n`);
  return file;
}

/** The provider files with openai.conf signing its requests (AWS SigV4) in place of its bearer key. */
async function sigv4Providers(from: string, to: string): Promise<string> {
  await mkdir(to, { recursive: true });
  for (const file of await readdir(from)) {
    let text = await readFile(join(from, file), 'utf8');
    if (file === 'openai.conf')
      text = text.replace('auth { auth_bearer; }', 'auth { auth_sigv4 "bedrock"; }');
    await writeFile(join(to, file), text);
  }
  return to;
}

export async function startGatewayProcess(
  ws: Workspace,
  upstreamUrl: string,
  variant: GatewayVariant,
): Promise<Peer> {
  const port = await freePort();
  const configFile = await writeGatewayConfig(ws, variant.id, {
    listenPort: port,
    billingUrl: variant.billing?.url,
    redisUrl: variant.redisUrl,
    logLevel: variant.logLevel,
    noSidecar: variant.noSidecar,
    outboxFsyncIntervalMs: variant.outboxFsyncIntervalMs,
    workers: variant.workers,
    store: variant.store,
    rateLimits: variant.rateLimits,
    sigv4: variant.sigv4,
  });
  const env = cleanEnv();
  for (const provider of ['OPENAI', 'ANTHROPIC', 'GEMINI']) {
    env[`ROUTER_PROVIDER_${provider}_BASE_URL`] = upstreamUrl;
    env[`ROUTER_PROVIDER_${provider}_API_KEY`] = SIM_KEY;
  }
  env.ROUTER_ACCESS_KEY_BENCH = BENCH_ACCESS_KEY;
  if (variant.sigv4 === true) {
    // A provider key would win over signing (a Bedrock API key): the signing credentials alone.
    delete env.ROUTER_PROVIDER_OPENAI_API_KEY;
    env.AWS_ACCESS_KEY_ID = 'AKIDBENCHSIGV4';
    env.AWS_SECRET_ACCESS_KEY = 'bench-sigv4-secret';
    env.AWS_REGION = 'us-east-1';
  }
  if (variant.tracesUrl !== undefined) {
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = variant.tracesUrl;
    env.OTEL_TRACES_SAMPLER = variant.tracesSampler ?? 'always_on';
  }
  const sidecarFlags = ws.sidecarNodeFlags(variant.id);
  if (sidecarFlags.length > 0) env.ROUTER_SIDECAR_NODE_FLAGS = sidecarFlags.join(' ');
  const [command, ...launcherArgs] = [...(ws.gatewayLauncher?.command ?? []), process.execPath];
  const service = startService(
    variant.id,
    command!,
    [...launcherArgs, ...ws.gatewayNodeFlags(variant.id), join(ws.repo, 'proxy/cli.ts'), '-c', configFile],
    { env, logFile: logFile(ws, variant.id) },
  );
  const origin = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${origin}/healthz`, service, ws.gatewayLauncher?.startTimeoutMs);
  } catch (err) {
    // Not left running: under valgrind a gateway that never answered still takes a core.
    await service.stop();
    throw err;
  }
  return { id: variant.id, kind: 'gateway', origin, service };
}

/**
 * Waits until a billing-on gateway's queue is empty (`billing.pending` of its /readyz: outbox lines not
 * yet delivered, or the Redis stream's length). A round at full load leaves tens of thousands of events
 * that its sidecar drains afterwards, in idle CPU time; without this wait the drain overlaps the next
 * peer's round and is charged to that peer. Returns the milliseconds waited (bounded by `timeoutMs`).
 */
export async function waitForBillingDrain(peer: Peer, timeoutMs = 120_000): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    const pending = await fetch(`${peer.origin}/readyz`).then(
      async (r) => ((await r.json()) as { billing?: { pending?: number } }).billing?.pending,
      () => undefined,
    );
    if (pending === undefined || pending === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return performance.now() - started;
}

/** Whether a gateway started with a `store` block really talks to Redis (or silently ignores it). */
export async function gatewayUsesRedis(
  peer: Peer,
  redisUrl: string,
): Promise<{ ok: boolean; detail: string }> {
  const ready = await fetch(`${peer.origin}/readyz`).then(
    async (r) => `${r.status} ${(await r.text()).slice(0, 300)}`,
    (err: unknown) => `readyz failed: ${String(err)}`,
  );
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  try {
    await redis.connect();
    const clients = String(await redis.call('CLIENT', 'LIST'))
      .split('\n')
      .filter((l) => l.trim() !== '').length;
    // One of the listed clients is this check itself.
    return { ok: clients > 1, detail: `redis clients besides the bench: ${clients - 1}; /readyz: ${ready}` };
  } finally {
    redis.disconnect();
  }
}

export async function startRedis(ws: Workspace): Promise<{ url: string; service: Service } | Unavailable> {
  const port = await freePort();
  const service = startService(
    'redis',
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', ws.tmp],
    { env: cleanEnv(), logFile: logFile(ws, 'redis') },
  );
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (!service.alive())
      return { id: 'gateway-redis', reason: `redis-server did not start: ${service.output()}` };
    const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    // Refused while the server starts: the rejection below handles it, not an unhandled 'error' event.
    redis.on('error', () => {});
    try {
      await redis.connect();
      await redis.ping();
      return { url, service };
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    } finally {
      redis.disconnect();
    }
  }
  await service.stop();
  return { id: 'gateway-redis', reason: 'redis-server did not answer PING within 10 s' };
}

export function findNginx(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir !== '' && existsSync(join(dir, 'nginx'))) return join(dir, 'nginx');
  }
  return existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : undefined;
}

export async function nginxVersion(bin: string): Promise<string> {
  const { stderr, stdout } = await run(bin, ['-v']);
  return (stderr || stdout).trim().replace(/^nginx version:\s*/, '');
}

export async function startNginx(ws: Workspace, upstreamUrl: string): Promise<Peer | Unavailable> {
  const bin = findNginx();
  if (bin === undefined)
    return { id: 'nginx', reason: 'nginx is not installed (not on PATH, no /usr/sbin/nginx)' };
  const prefix = join(ws.tmp, 'nginx');
  await mkdir(join(prefix, 'logs'), { recursive: true });
  const port = await freePort();
  const upstream = new URL(upstreamUrl).host;
  const conf = `# Written by bench/lib/peers.ts: a plain reverse proxy with upstream keep-alive.
worker_processes auto;
worker_rlimit_nofile 40000;
daemon off;
pid ${prefix}/nginx.pid;
error_log ${prefix}/logs/error.log warn;
events { worker_connections 20000; }
http {
  access_log off;
  client_body_temp_path ${prefix}/client_body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  client_max_body_size 20m;
  client_body_buffer_size 2m;
  keepalive_requests 1000000;
  upstream sim {
    server ${upstream};
    keepalive 256;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port} backlog=8192;
    location / {
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 120s;
    }
  }
}
`;
  const confFile = join(prefix, 'nginx.conf');
  await writeFile(confFile, conf);
  const service = startService(
    'nginx',
    bin,
    ['-p', `${prefix}/`, '-c', confFile, '-e', `${prefix}/logs/error.log`],
    { env: cleanEnv(), logFile: logFile(ws, 'nginx') },
  );
  const origin = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${origin}/v1/models`, service);
  } catch (err) {
    await service.stop();
    return { id: 'nginx', reason: `nginx did not start: ${(err as Error).message.slice(0, 500)}` };
  }
  return { id: 'nginx', kind: 'nginx', origin, service };
}

/**
 * The bare Node forwarder (bench/lib/bare-forwarder.ts): node:http in, undici out, no gateway work, with
 * the gateway's V8 flags. What it costs is the floor under any Node.js proxy on this path.
 */
export async function startNodeFloor(ws: Workspace, upstreamUrl: string): Promise<Peer> {
  const port = await freePort();
  const service = startService(
    'node-floor',
    process.execPath,
    [...GATEWAY_V8_FLAGS, join(ws.repo, 'bench/lib/bare-forwarder.ts'), upstreamUrl, String(port)],
    { env: cleanEnv(), logFile: logFile(ws, 'node-floor') },
  );
  const origin = `http://127.0.0.1:${port}`;
  await waitForHttp(`${origin}/healthz`, service);
  return { id: 'node-floor', kind: 'nginx', origin, service };
}

/** Installs Portkey's gateway into a temporary folder (kept between runs) and starts it. */
export async function startPortkey(ws: Workspace): Promise<Peer | Unavailable> {
  const dir = join(tmpdir(), `llm-router-bench-portkey-${PORTKEY_VERSION}`);
  const entry = join(dir, 'node_modules/@portkey-ai/gateway/build/start-server.js');
  if (!existsSync(entry)) {
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, 'package.json'),
      JSON.stringify({
        name: 'bench-portkey',
        private: true,
        dependencies: { '@portkey-ai/gateway': PORTKEY_VERSION },
        overrides: { '@hono/node-server': PORTKEY_HONO_NODE_SERVER },
      }),
    );
    try {
      await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], {
        cwd: dir,
        timeout: 240_000,
        env: cleanEnv(),
      });
    } catch (err) {
      return {
        id: 'portkey',
        reason: `npm install @portkey-ai/gateway failed: ${(err as Error).message.slice(0, 400)}`,
      };
    }
  }
  const port = await freePort();
  const service = startService('portkey', process.execPath, [entry, `--port=${port}`, '--headless'], {
    env: cleanEnv(),
    cwd: dir,
    logFile: logFile(ws, 'portkey'),
  });
  const origin = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${origin}/`, service, 30_000);
  } catch (err) {
    await service.stop();
    return { id: 'portkey', reason: `Portkey did not start: ${(err as Error).message.slice(0, 500)}` };
  }
  return { id: 'portkey', kind: 'portkey', origin, service };
}

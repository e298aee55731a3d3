// Test support for billing end to end: the upstream simulator, the billing simulator, a gateway with
// billing on (file-mode outbox in a temporary directory) and the billing sidecar, each either in this
// process or as a real child process (kill -9 tests). Helpers wait on the simulators' own signals
// (waitForEvents, waitFor, waitForDrain), never on fixed sleeps.

import { type ChildProcess, spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Decimal } from 'decimal.js';
import { type Logger, pino } from 'pino';
import type { UsageEvent } from '../../billing/event/usage-event.ts';
import type { RouterConfig } from '../../common/config-types.ts';
import { loadConfig } from '../../config/load.ts';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { type Sidecar, type SidecarOptions, startSidecar } from '../../sidecar/sidecar.ts';
import { type BillingSim, type BillingSimOptions, startBillingSim } from '../../sim/billing/server.ts';
import { startUpstreamSim, type UpstreamSim, type UpstreamSimOptions } from '../../sim/upstream/server.ts';
import {
  MODELS_FILE,
  PRICING_FILE,
  PROVIDERS_DIR,
  ROOT,
  simProviderEnv,
  TRUST_LOOPBACK_IDS,
} from './stack.ts';

export const BILLING_API_KEY = 'sk_billing_test_secret_key';
export const BILLING_PROJECT = 'proj_test';
export const BILLING_RULE_SET = 'rs_router';
/** Name of the access key ACCESS_KEY (ROUTER_ACCESS_KEY_CLIENT_A): the default subject id. */
export const SUBJECT_ID = 'client_a';
/** Every wallet starts here, so a debit is `START_BALANCE - balance`. */
export const START_BALANCE = '1000';

export interface BillingStackOptions {
  /** Extra keys of the `billing:` block, snake_case like the file (only_billable_success, ...). */
  readonly billing?: Readonly<Record<string, string | number | boolean>>;
  /** Extra provider files (name -> DSL source) beside copies of the shipped ones. */
  readonly providers?: Readonly<Record<string, string>>;
  /** Extra environment (overrides the stack's access key and provider keys). */
  readonly env?: Readonly<Record<string, string>>;
  /** Start the gateway in this process (default true); false: the test spawns its own. */
  readonly gateway?: boolean;
  /** Start the sidecar in this process (default true); false: none, or the test spawns one. */
  readonly sidecar?: boolean;
  /** Delivery tuning of the in-process sidecar. */
  readonly worker?: SidecarOptions['worker'];
  readonly billingSim?: Partial<BillingSimOptions>;
  /** Trust loopback callers' request ids (default true, TRUST_LOOPBACK_IDS). */
  readonly trustCallerIds?: boolean;
  /** More top-level keys of the main configuration, as YAML lines (e.g. a `hooks:` list). */
  readonly extraYaml?: string;
  /** Replace the model registry (YAML text). */
  readonly modelsYaml?: string;
  /** Options of the upstream simulator (the cloud credentials it checks). */
  readonly sim?: UpstreamSimOptions;
  /** Level of the in-process gateway's and sidecar's logs kept in `logs` (default info). */
  readonly logLevel?: string;
  /** More environment made once the upstream simulator runs (stack.ts `simEnv`). */
  readonly simEnv?: (sim: UpstreamSim, dir: string) => Promise<Readonly<Record<string, string>>>;
}

export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [key: string]: unknown;
}

export interface BillingStack {
  /** Gateway base URL ('' when the gateway is not in-process). */
  readonly url: string;
  readonly upstream: UpstreamSim;
  readonly billing: BillingSim;
  readonly gateway: RunningGateway | undefined;
  readonly sidecar: Sidecar | undefined;
  readonly dir: string;
  readonly configFile: string;
  readonly outboxDir: string;
  /** Environment of the gateway (access key, provider base URLs and keys). */
  readonly env: Record<string, string>;
  /** Log lines of the in-process gateway and sidecar (parsed pino JSON). */
  readonly logs: LogLine[];
  /** Start an in-process sidecar (when the stack was started without one, or after stopSidecar). */
  startSidecar(): Promise<Sidecar>;
  stopSidecar(): Promise<void>;
  /** The accepted event of a request id, once the billing simulator has it. */
  eventFor(requestId: string, timeoutMs?: number): Promise<UsageEvent>;
  /** Exact amount debited from a subject's wallet so far (decimal string). */
  debited(subjectId?: string, subjectType?: string): string;
  close(): Promise<void>;
}

function yamlValue(value: string | number | boolean): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value);
}

/** A pino logger whose JSON lines land in `lines`, at the given level. */
export function capturingLogger(lines: LogLine[], level = 'info'): Logger {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (text.trim() !== '') lines.push(JSON.parse(text) as LogLine);
      }
      done();
    },
  });
  return pino({ level }, sink);
}

export async function startBillingStack(opts: BillingStackOptions = {}): Promise<BillingStack> {
  const upstream = await startUpstreamSim(opts.sim);
  const billing = await startBillingSim({
    apiKey: BILLING_API_KEY,
    projectId: BILLING_PROJECT,
    ruleSets: { [BILLING_RULE_SET]: 'published' },
    wallets: { [`api_key:${SUBJECT_ID}`]: START_BALANCE },
    ...opts.billingSim,
  });
  const dir = await mkdtemp(join(tmpdir(), 'router-billing-e2e-'));
  const outboxDir = join(dir, 'outbox');
  let providersDir = PROVIDERS_DIR;
  if (opts.providers !== undefined) {
    providersDir = join(dir, 'providers');
    await mkdir(providersDir);
    for (const f of await readdir(PROVIDERS_DIR))
      await copyFile(join(PROVIDERS_DIR, f), join(providersDir, f));
    for (const [name, src] of Object.entries(opts.providers))
      await writeFile(join(providersDir, `${name}.conf`), src);
  }
  const billingBlock: Record<string, string | number | boolean> = {
    enabled: true,
    base_url: billing.url,
    project_id: BILLING_PROJECT,
    api_key: BILLING_API_KEY,
    extractor_rule_set_id: BILLING_RULE_SET,
    outbox_dir: outboxDir,
    listen: '127.0.0.1:0',
    retry_interval_ms: 20,
    max_retry_interval_ms: 200,
    request_timeout_ms: 1000,
    ...opts.billing,
  };
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
      'log: { level: info }',
      opts.trustCallerIds === false ? '' : TRUST_LOOPBACK_IDS,
      opts.extraYaml ?? '',
      'billing:',
      ...Object.entries(billingBlock).map(([k, v]) => `  ${k}: ${yamlValue(v)}`),
      '',
    ].join('\n'),
  );
  const env = simProviderEnv(upstream.url, Object.keys(opts.providers ?? {}));
  Object.assign(env, opts.env);
  if (opts.simEnv !== undefined) Object.assign(env, await opts.simEnv(upstream, dir));

  const logs: LogLine[] = [];
  const logger = capturingLogger(logs, opts.logLevel);
  let gateway: RunningGateway | undefined;
  let sidecar: Sidecar | undefined;
  let config: RouterConfig | undefined;

  async function loadOwnConfig(): Promise<RouterConfig> {
    if (config !== undefined) return config;
    const loaded = await loadConfig(configFile, { env });
    if (loaded.config === undefined)
      throw new Error(`billing stack config invalid: ${loaded.diagnostics.map((d) => d.message).join('; ')}`);
    config = loaded.config;
    return config;
  }

  async function startOwnSidecar(): Promise<Sidecar> {
    if (sidecar !== undefined) throw new Error('sidecar already running');
    sidecar = await startSidecar(await loadOwnConfig(), {
      logger: logger.child({ name: 'router-billing' }),
      listen: { host: '127.0.0.1', port: 0 },
      worker: { pollIntervalMs: 100, ...opts.worker },
    });
    return sidecar;
  }

  try {
    if (opts.gateway !== false) gateway = await startGateway(configFile, { env, sidecar: false, logger });
    if (opts.sidecar !== false) await startOwnSidecar();
  } catch (err) {
    await gateway?.close();
    await upstream.close();
    await billing.close();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }

  return {
    url: gateway?.url ?? '',
    upstream,
    billing,
    get gateway() {
      return gateway;
    },
    get sidecar() {
      return sidecar;
    },
    dir,
    configFile,
    outboxDir,
    env,
    logs,
    startSidecar: startOwnSidecar,
    async stopSidecar() {
      const s = sidecar;
      sidecar = undefined;
      await s?.close();
    },
    eventFor: (requestId, timeoutMs = 10_000) => eventFor(billing, requestId, timeoutMs),
    debited(subjectId = SUBJECT_ID, subjectType = 'api_key') {
      return debitedFrom(billing, subjectType, subjectId);
    },
    async close() {
      await gateway?.close();
      await sidecar?.close();
      await upstream.close();
      await billing.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Waits (on the simulator's accept signal) until an event with this request id has been accepted. */
export async function eventFor(sim: BillingSim, requestId: string, timeoutMs: number): Promise<UsageEvent> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = sim.events.find((e) => e.external_event_id === requestId);
    if (found !== undefined) return found;
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`no usage event for request ${requestId} within ${timeoutMs} ms`);
    await sim.waitForEvents(sim.accepted + 1, left);
  }
}

/** START_BALANCE minus the current balance, exactly (decimal arithmetic in the simulator's ledger). */
export function debitedFrom(sim: BillingSim, subjectType: string, subjectId: string): string {
  return subtractDecimal(START_BALANCE, sim.balance(subjectType, subjectId));
}

export function subtractDecimal(a: string, b: string): string {
  return new Decimal(a).minus(new Decimal(b)).toFixed();
}

/** All text in the outbox directory (every file, whatever its state: active, sealed, dead-letter). */
export async function outboxText(outboxDir: string): Promise<string> {
  let names: string[];
  try {
    names = await readdir(outboxDir);
  } catch {
    return '';
  }
  const parts: string[] = [];
  for (const name of names) {
    // A running sidecar's checkpoint temporaries come and go between the listing and the read.
    if (name.endsWith('.tmp')) continue;
    try {
      parts.push(await readFile(join(outboxDir, name), 'utf8'));
    } catch (err) {
      if (
        (err as NodeJS.ErrnoException).code !== 'ENOENT' &&
        (err as NodeJS.ErrnoException).code !== 'EISDIR'
      )
        throw err;
    }
  }
  return parts.join('\n');
}

export interface ChildGateway {
  readonly child: ChildProcess;
  readonly url: string;
  /** Resolves with the exit code and signal. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The last log lines the process printed, for an assertion's message. */
  readonly recentLog: () => string;
  /** Every JSON log line the process (and its children sharing its stdout) printed so far. */
  readonly lines: readonly Record<string, unknown>[];
  /** SIGKILL to the process, and to its whole process group when it was spawned with `group`. */
  readonly killAll: () => void;
}

/**
 * Runs `node <script> -c <config> [...args]` with the project's node (process.execPath) and resolves
 * once its log line `logMsg` (pino JSON on stdout) names a `url`.
 */
export function spawnLogged(
  script: string,
  args: readonly string[],
  env: Record<string, string>,
  logMsg: string,
  opts: { group?: boolean } = {},
): Promise<ChildGateway> {
  const child = spawn(process.execPath, [join(ROOT, script), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env, ROUTER_LOG_LEVEL: 'info' },
    // A process group of its own, so that a failed test can end the process and every child it forked.
    detached: opts.group === true,
  });
  const killAll = () => {
    try {
      if (opts.group === true && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      else child.kill('SIGKILL');
    } catch {
      // gone already
    }
  };
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return new Promise((resolve, reject) => {
    let buffered = '';
    let stderr = '';
    const recent: string[] = [];
    const lines: Record<string, unknown>[] = [];
    const recentLog = () => recent.join('\n');
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    child.stdout?.on('data', function onData(chunk: Buffer) {
      buffered += chunk.toString('utf8');
      let nl = buffered.indexOf('\n');
      while (nl >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        nl = buffered.indexOf('\n');
        recent.push(line);
        if (recent.length > 40) recent.shift();
        try {
          const parsed = JSON.parse(line) as { msg?: string; url?: string };
          lines.push(parsed);
          if (parsed.msg === logMsg && typeof parsed.url === 'string') {
            resolve({ child, url: parsed.url, exited, recentLog, lines, killAll });
          }
        } catch {
          // not a log line
        }
      }
    });
    exited.then(({ code, signal }) =>
      reject(new Error(`${script} exited (${code ?? signal}) before listening: ${stderr.slice(0, 2000)}`)),
    );
  });
}

/** The gateway CLI as a child process, without its supervised sidecar. */
export function spawnGateway(stack: BillingStack): Promise<ChildGateway> {
  return spawnLogged('proxy/cli.ts', ['-c', stack.configFile, '--no-sidecar'], stack.env, 'router listening');
}

/** `router-billing` as a child process. */
export function spawnSidecar(stack: BillingStack): Promise<ChildGateway> {
  return spawnLogged('bin/sidecar-main.ts', ['-c', stack.configFile], stack.env, 'router-billing listening');
}

/**
 * Waits for a condition that has no event to wait on (a counter of another process, a file), checking
 * it every few milliseconds; rejects after timeoutMs. Never a stand-in for a signal that exists.
 */
export async function waitUntil(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Pending events as a sidecar's /readyz reports them (undefined when it answers no delivery block). */
export async function sidecarPending(sidecarUrl: string): Promise<number | undefined> {
  const body = (await (await fetch(`${sidecarUrl}/readyz`)).json()) as { delivery?: { pending: number } };
  return body.delivery?.pending;
}

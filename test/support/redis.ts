// Test support: a private redis-server on a free port in a temporary directory, without persistence
// unless asked, plain or TLS only. Tests stop and restart it (same port) to exercise outages. Never a
// mock: when redis-server is missing the test fails with a message saying how to get it (.ci/run
// installs it).

import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import type { StoreConfig } from '../../common/config-types.ts';
import type { StoredAccessKey } from '../../common/store-types.ts';
import { hashAccessKey } from '../../hooks/builtin/auth.ts';

export interface RedisServer {
  /** The TLS port of a TLS server (which has no plain one). */
  readonly port: number;
  /** redis://127.0.0.1:<port>, rediss:// for a TLS server. */
  readonly url: string;
  /** A plain admin connection for assertions (INFO, XLEN ...); reconnects after restarts. */
  readonly admin: Redis;
  /** Stop the server (SIGKILL: an abrupt outage). Resolves once the process is gone. */
  stop(): Promise<void>;
  /** Start it again on the same port (empty: no persistence). */
  start(): Promise<void>;
  /** Calls per command name from INFO commandstats, e.g. { evalsha: 3, xadd: 1 }. */
  commandCounts(): Promise<Record<string, number>>;
  /**
   * MONITOR from now on: stop() returns the commands clients sent (lower-case name + args), leaving out
   * those a Lua script issued and the monitor's own bookkeeping, i.e. one entry per client command.
   */
  monitor(sources?: ReadonlySet<string>): Promise<{ stop(): Promise<string[][]> }>;
  /** Client addresses (ip:port) whose connection name starts with `prefix` (CLIENT LIST). */
  clientAddrs(prefix: string): Promise<Set<string>>;
  /** The next line of the server's log matching `pattern`, logged after this call. */
  logged(pattern: RegExp): Promise<string>;
  close(): Promise<void>;
}

/**
 * A TLS-only server (`--port 0 --tls-port <port>`). The server certificate must name 127.0.0.1 (the
 * admin connection's address); `client` is what the admin connection trusts and presents.
 */
export interface RedisTls {
  readonly certFile: string;
  readonly keyFile: string;
  /** tls-ca-cert-file: the CA of client certificates. */
  readonly caFile: string;
  /** tls-auth-clients: a client must present a certificate signed by caFile. */
  readonly authClients: boolean;
  readonly client: { readonly ca: Buffer; readonly cert?: Buffer; readonly key?: Buffer };
}

export function findRedisServer(): string {
  for (const candidate of ['redis-server', '/usr/bin/redis-server', '/usr/local/bin/redis-server']) {
    try {
      execFileSync(candidate, ['--version'], { stdio: 'ignore' });
      return candidate;
    } catch {
      // try the next one
    }
  }
  throw new Error(
    'redis-server is not installed; the shared-store tests need a real one (apt-get install redis-server, or run .ci/run)',
  );
}

/**
 * A free port below the kernel's ephemeral range. Tests stop and restart Redis on the same port; a port
 * the OS handed out (port 0) is in the ephemeral range, where another test's outgoing connection can take
 * it as its local port while Redis is down, and the restart then fails with EADDRINUSE.
 */
export async function freePort(): Promise<number> {
  let low = 32768;
  try {
    low = Number((await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')).trim().split(/\s+/)[0]);
  } catch {
    // not Linux: keep the usual default
  }
  const floor = 10_000;
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = floor + Math.floor(Math.random() * Math.max(1, low - floor));
    const server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (bound) {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      return port;
    }
  }
  throw new Error('no free port below the ephemeral range');
}

/**
 * `persist`: append-only file fsync'ed on every write, so a SIGKILL keeps every acknowledged write (as a
 * production Redis with `appendfsync always` would) and a restart on the same port finds them.
 */
export async function startRedis(
  opts: { persist?: boolean; extraArgs?: readonly string[]; tls?: RedisTls } = {},
): Promise<RedisServer> {
  const bin = findRedisServer();
  const dir = await mkdtemp(join(tmpdir(), 'router-redis-'));
  const port = await freePort();
  const tls = opts.tls;
  const listen =
    tls === undefined
      ? ['--port', String(port)]
      : [
          '--port',
          '0',
          '--tls-port',
          String(port),
          '--tls-cert-file',
          tls.certFile,
          '--tls-key-file',
          tls.keyFile,
          '--tls-ca-cert-file',
          tls.caFile,
          '--tls-auth-clients',
          tls.authClients ? 'yes' : 'no',
        ];
  let child: ChildProcess | undefined;
  const waiters = new Set<{ pattern: RegExp; resolve: (line: string) => void }>();
  function onLogLine(line: string): void {
    for (const waiter of waiters) {
      if (!waiter.pattern.test(line)) continue;
      waiters.delete(waiter);
      waiter.resolve(line);
    }
  }

  async function start(): Promise<void> {
    const proc = spawn(
      bin,
      [
        ...listen,
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        opts.persist ? 'yes' : 'no',
        ...(opts.persist ? ['--appendfsync', 'always'] : []),
        '--dir',
        dir,
        '--protected-mode',
        'no',
        ...(opts.extraArgs ?? []),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = proc;
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const onData = (chunk: Buffer): void => {
        out += chunk.toString();
        if (out.includes('Ready to accept connections')) {
          proc.stdout?.off('data', onData);
          let partial = '';
          proc.stdout?.on('data', (more: Buffer) => {
            const lines = (partial + more.toString()).split('\n');
            partial = lines.pop() ?? '';
            for (const line of lines) onLogLine(line);
          });
          proc.off('exit', onExit);
          resolve();
        }
      };
      const onExit = (code: number | null): void =>
        reject(new Error(`redis-server exited (${code}) before it was ready: ${out.slice(-500)}`));
      proc.stdout?.on('data', onData);
      proc.stderr?.resume();
      proc.once('exit', onExit);
    });
  }

  async function stop(): Promise<void> {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await exited;
  }

  await start();
  const admin = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 50,
    protocol: 2,
    ...(tls === undefined ? {} : { tls: { ...tls.client } }),
  });
  admin.on('error', () => {});
  await admin.connect();

  return {
    port,
    url: `${tls === undefined ? 'redis' : 'rediss'}://127.0.0.1:${port}`,
    admin,
    stop,
    start,
    async commandCounts() {
      const text = await admin.info('commandstats');
      const counts: Record<string, number> = {};
      for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[m[1]!] = Number(m[2]);
      return counts;
    },
    async clientAddrs(prefix) {
      const list = (await admin.client('LIST')) as string;
      const out = new Set<string>();
      for (const line of list.split('\n')) {
        const addr = /(?:^| )addr=(\S+)/.exec(line)?.[1];
        const name = /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '';
        if (addr !== undefined && name.startsWith(prefix)) out.add(addr);
      }
      return out;
    },
    async monitor(sources) {
      // A plain socket: ioredis's monitor mode can mistake the first monitored line for a reply
      // ("Command queue state error") and then reconnects forever without an error listener.
      const socket =
        tls === undefined
          ? connect({ port, host: '127.0.0.1' })
          : tlsConnect({ port, host: '127.0.0.1', ...tls.client });
      socket.setEncoding('utf8');
      const seen: string[][] = [];
      const marker = `monitor-end-${Math.random().toString(36).slice(2)}`;
      let onMarker: (() => void) | undefined;
      let buffered = '';
      let started: (() => void) | undefined;
      const ready = new Promise<void>((resolve, reject) => {
        started = resolve;
        socket.once('error', reject);
      });
      socket.on('data', (chunk: string) => {
        buffered += chunk;
        let nl = buffered.indexOf('\r\n');
        while (nl >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 2);
          nl = buffered.indexOf('\r\n');
          if (line === '+OK') {
            started?.();
            continue;
          }
          const parsed = parseMonitorLine(line);
          if (parsed === undefined) continue;
          const { source, args } = parsed;
          if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) {
            onMarker?.();
            continue;
          }
          if (source === 'lua') continue;
          if (sources !== undefined && !sources.has(source)) continue;
          seen.push([args[0]!.toLowerCase(), ...args.slice(1)]);
        }
      });
      socket.write('MONITOR\r\n');
      await ready;
      return {
        async stop() {
          const done = new Promise<void>((resolve) => {
            onMarker = resolve;
          });
          await admin.echo(marker);
          await done;
          socket.destroy();
          return seen;
        },
      };
    },
    logged(pattern) {
      return new Promise<string>((resolve) => {
        waiters.add({ pattern, resolve });
      });
    },
    async close() {
      admin.disconnect();
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** PEM files of a throwaway CA and the server and client certificates it signed, in one folder. */
export interface TestCertificates {
  readonly caFile: string;
  /** Names localhost and 127.0.0.1. */
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
}

/** Makes TestCertificates in `dir` with openssl (EC P-256 keys, valid for two days). */
export async function makeTestCertificates(dir: string): Promise<TestCertificates> {
  const run = promisify(execFile);
  const path = (name: string): string => join(dir, name);
  const cnf = path('openssl.cnf');
  await writeFile(
    cnf,
    [
      '[req]',
      'distinguished_name = dn',
      '[dn]',
      '[ca]',
      'basicConstraints = critical, CA:TRUE',
      'keyUsage = critical, keyCertSign, cRLSign',
      '[server]',
      'subjectAltName = DNS:localhost, IP:127.0.0.1',
      // A cluster node presents it on its own outgoing connections too.
      'extendedKeyUsage = serverAuth, clientAuth',
      '[client]',
      'extendedKeyUsage = clientAuth',
      '',
    ].join('\n'),
  );
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await run('openssl', [
    'req',
    '-x509',
    '-config',
    cnf,
    '-extensions',
    'ca',
    ...newKey,
    '-keyout',
    path('ca-key.pem'),
    '-out',
    path('ca.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=router test CA',
  ]);
  for (const [name, cn, serial] of [
    ['server', 'localhost', '2'],
    ['client', 'router', '3'],
  ] as const) {
    await run('openssl', [
      'req',
      '-new',
      '-config',
      cnf,
      ...newKey,
      '-keyout',
      path(`${name}-key.pem`),
      '-out',
      path(`${name}.csr`),
      '-subj',
      `/CN=${cn}`,
    ]);
    await run('openssl', [
      'x509',
      '-req',
      '-in',
      path(`${name}.csr`),
      '-CA',
      path('ca.pem'),
      '-CAkey',
      path('ca-key.pem'),
      '-set_serial',
      serial,
      '-days',
      '2',
      '-extfile',
      cnf,
      '-extensions',
      name,
      '-out',
      path(`${name}.pem`),
    ]);
  }
  return {
    caFile: path('ca.pem'),
    serverCertFile: path('server.pem'),
    serverKeyFile: path('server-key.pem'),
    clientCertFile: path('client.pem'),
    clientKeyFile: path('client-key.pem'),
  };
}

/** Command-count difference between two commandCounts() snapshots (only names that changed). */
export function countDelta(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, n] of Object.entries(after)) {
    const d = n - (before[name] ?? 0);
    if (d !== 0) out[name] = d;
  }
  return out;
}

/** A store block for tests (the defaults of config/schema.json with a unique key prefix). */
export function testStoreConfig(url: string, overrides: Partial<StoreConfig> = {}): StoreConfig {
  return {
    enabled: true,
    addr: url,
    cluster: false,
    billingStreamShards: 1,
    sentinels: [],
    sentinelName: 'mymaster',
    sentinelPassword: undefined,
    username: undefined,
    password: undefined,
    tls: false,
    keyPrefix: `t${process.pid}-${Math.random().toString(36).slice(2, 8)}:`,
    operationTimeoutMs: 500,
    viewCacheMs: 2000,
    accessKeyMode: 'redis_preferred',
    billingStream: 'billing:events',
    billingConsumerGroup: 'router-billing',
    billingConsumerName: '',
    billingMaxAttempts: 10,
    billingWaitReplicas: 0,
    accessKeyHashSecret: 'test-hash-secret',
    previousAccessKeyHashSecret: '',
    reclaimIdleMs: 30_000,
    ...overrides,
  };
}

/**
 * One MONITOR line: `+<time> [<db> <source>] "cmd" "arg" ...`, source being ip:port or `lua`; arguments
 * are quoted with C-style escapes (backslash-quote, backslash-n, backslash-xHH, ...).
 */
export function parseMonitorLine(line: string): { source: string; args: string[] } | undefined {
  const m = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
  if (m === null) return undefined;
  const args: string[] = [];
  const text = m[2];
  let i = 0;
  while (i < text!.length) {
    if (text![i] !== '"') {
      i++;
      continue;
    }
    let arg = '';
    i++;
    while (i < text!.length && text![i] !== '"') {
      if (text![i] === '\\' && i + 1 < text!.length) {
        const next = text![i + 1];
        if (next === 'x') {
          arg += String.fromCharCode(Number.parseInt(text!.slice(i + 2, i + 4), 16));
          i += 4;
          continue;
        }
        arg += next === 'n' ? '\n' : next === 'r' ? '\r' : next === 't' ? '\t' : next;
        i += 2;
        continue;
      }
      arg += text![i];
      i++;
    }
    args.push(arg);
    i++;
  }
  return { source: m[1]!, args };
}

/** An active access-key record for `secret`, hashed with testStoreConfig's hash secret. */
export function testKeyRecord(
  name: string,
  secret: string,
  extra: Partial<StoredAccessKey> = {},
): StoredAccessKey {
  return {
    name,
    secretHash: hashAccessKey('test-hash-secret', secret),
    status: 'active',
    subjectType: 'api_key',
    subjectId: name,
    createdAt: 1_700_000_000_000,
    expiresAt: undefined,
    version: 1,
    ...extra,
  };
}

// Test support: a Redis failover setup on free ports: a primary, one replica and one Sentinel that
// monitors them (quorum 1), each a real redis-server process. `failover()` asks the Sentinel to promote
// the replica and resolves once it names the new primary.

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { findRedisServer, freePort, type RedisServer, startRedis } from './redis.ts';

export const SENTINEL_NAME = 'mymaster';

export interface SentinelSetup {
  readonly primary: RedisServer;
  readonly replica: RedisServer;
  readonly sentinelPort: number;
  /** The port of the server the Sentinel names as primary now. */
  primaryPort(): Promise<number>;
  /** Promotes the replica (SENTINEL FAILOVER); resolves once the Sentinel names it. */
  failover(): Promise<void>;
  close(): Promise<void>;
}

export async function startSentinelSetup(): Promise<SentinelSetup> {
  const primary = await startRedis();
  const replica = await startRedis({ extraArgs: ['--replicaof', '127.0.0.1', String(primary.port)] });
  await waitFor(async () => /master_link_status:up/.test(await replica.admin.info('replication')));
  const dir = await mkdtemp(join(tmpdir(), 'router-sentinel-'));
  const sentinelPort = await freePort();
  const conf = join(dir, 'sentinel.conf');
  await writeFile(
    conf,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      'protected-mode no',
      `dir ${dir}`,
      `sentinel monitor ${SENTINEL_NAME} 127.0.0.1 ${primary.port} 1`,
      `sentinel down-after-milliseconds ${SENTINEL_NAME} 1000`,
      `sentinel failover-timeout ${SENTINEL_NAME} 5000`,
      '',
    ].join('\n'),
  );
  const child = await spawnSentinel(conf);
  const sentinel = new Redis({
    port: sentinelPort,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  sentinel.on('error', () => {});
  await sentinel.connect();

  async function primaryPort(): Promise<number> {
    const addr = (await sentinel.call('SENTINEL', 'get-master-addr-by-name', SENTINEL_NAME)) as string[];
    return Number(addr[1]);
  }

  return {
    primary,
    replica,
    sentinelPort,
    primaryPort,
    async failover() {
      // The Sentinel learns of the replica from the primary's INFO, which it polls every few seconds.
      // It promotes only a replica it has heard from (INFO) with a working link to the primary.
      await waitFor(async () => {
        const replicas = (await sentinel.call('SENTINEL', 'replicas', SENTINEL_NAME)) as string[][];
        return replicas.some((fields) => {
          const info = new Map<string, string>();
          for (let i = 0; i + 1 < fields.length; i += 2) info.set(fields[i]!, fields[i + 1]!);
          return info.get('flags') === 'slave' && info.get('master-link-status') === 'ok';
        });
      });
      await sentinel.call('SENTINEL', 'failover', SENTINEL_NAME);
      await waitFor(async () => (await primaryPort()) === replica.port);
      await waitFor(async () => /role:master/.test(await replica.admin.info('replication')));
    },
    async close() {
      sentinel.disconnect();
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGKILL');
      await exited;
      await replica.close();
      await primary.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Polls `check` until it holds (bounded: a setup that never converges fails the test). */
async function waitFor(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error('the Redis failover setup did not reach the expected state');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Starts `redis-server <conf> --sentinel`; resolves once it monitors its primary. */
export async function spawnSentinel(conf: string): Promise<ChildProcess> {
  const child: ChildProcess = spawn(findRedisServer(), [conf, '--sentinel'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    const onData = (chunk: Buffer): void => {
      out += chunk.toString();
      if (out.includes('+monitor master')) {
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        child.off('exit', onExit);
        resolve();
      }
    };
    const onExit = (code: number | null): void =>
      reject(new Error(`redis sentinel exited (${code}) before it was ready: ${out.slice(-500)}`));
    child.stdout?.on('data', onData);
    child.stderr?.resume();
    child.once('exit', onExit);
  });
  return child;
}

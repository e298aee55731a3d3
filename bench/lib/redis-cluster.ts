// A Redis Cluster of three primaries for the bench, as test/support/redis-cluster.ts builds one: a
// redis-server per node with cluster mode on, joined by `redis-cli --cluster create`, ready once every
// node reports cluster_state:ok.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import type { Workspace } from './peers.ts';
import { freePort, type Service, startService } from './proc.ts';

const run = promisify(execFile);

export interface RedisClusterProcess {
  /** Seed URLs, comma-separated: what `store.addr` takes with `store.cluster: true`. */
  seeds: string;
  services: Service[];
  stop(): Promise<void>;
}

function onPath(bin: string): boolean {
  return (process.env.PATH ?? '').split(':').some((dir) => dir !== '' && existsSync(join(dir, bin)));
}

/** Runs `check` on a fresh connection to `url` until it returns true; false after `timeoutMs`. */
async function until(
  url: string,
  check: (r: Redis) => Promise<boolean>,
  timeoutMs = 20_000,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    // Refused while the server starts: the rejection below handles it, not an unhandled 'error' event.
    redis.on('error', () => {});
    try {
      await redis.connect();
      if (await check(redis)) return true;
    } catch {
      // not up yet
    } finally {
      redis.disconnect();
    }
    await sleep(100);
  }
  return false;
}

export async function startRedisCluster(
  ws: Workspace,
  name = 'redis-cluster',
): Promise<RedisClusterProcess | { reason: string }> {
  const missing = ['redis-server', 'redis-cli'].filter((bin) => !onPath(bin));
  if (missing.length > 0) return { reason: `${missing.join(' and ')} not on PATH` };
  const services: Service[] = [];
  const stop = async () => {
    for (const s of services) await s.stop();
  };
  try {
    const urls: string[] = [];
    for (let i = 0; i < 3; i++) {
      // Each node keeps its nodes.conf in a folder of its own; the bus port is chosen too, since
      // port + 10000 (the default) may be taken.
      const dir = join(ws.tmp, name, `node-${i}`);
      await mkdir(dir, { recursive: true });
      const port = await freePort();
      services.push(
        startService(
          `${name}-${i}`,
          'redis-server',
          [
            ...['--port', String(port), '--bind', '127.0.0.1', '--dir', dir],
            ...['--save', '', '--appendonly', 'no'],
            ...['--cluster-enabled', 'yes', '--cluster-port', String(await freePort())],
            ...['--cluster-node-timeout', '2000'],
          ],
          { logFile: join(dir, 'redis.log') },
        ),
      );
      urls.push(`redis://127.0.0.1:${port}`);
    }
    for (const [i, url] of urls.entries()) {
      if (!(await until(url, async (r) => (await r.ping()) === 'PONG')))
        throw new Error(`node ${i} did not answer PING: ${services[i]!.output().slice(-500)}`);
    }
    await run('redis-cli', [
      '--cluster',
      'create',
      ...urls.map((u) => new URL(u).host),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    for (const url of urls) {
      const ok = await until(url, async (r) =>
        String(await r.call('CLUSTER', 'INFO')).includes('cluster_state:ok'),
      );
      if (!ok) throw new Error(`${url} did not reach cluster_state:ok`);
    }
    return { seeds: urls.join(','), services, stop };
  } catch (err) {
    await stop();
    return { reason: `redis cluster did not start: ${(err as Error).message.slice(0, 800)}` };
  }
}

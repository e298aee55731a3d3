// Test support: a Redis Cluster of three primaries on free ports, each a real redis-server process with
// cluster mode on, joined by `redis-cli --cluster create`. Resolves once every node reports
// cluster_state:ok. `restart(i)` kills one primary (SIGKILL) and starts it again on its port with its
// nodes.conf and append-only file, so it rejoins with its slots and data.

import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster } from 'ioredis';
import { freePort, type RedisServer, startRedis } from './redis.ts';

const run = promisify(execFile);

export interface RedisClusterSetup {
  readonly nodes: readonly RedisServer[];
  /** "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3": the seed list ROUTER_STORE_ADDR takes. */
  readonly seeds: string;
  /** A cluster client for assertions. */
  readonly admin: Cluster;
  /** SIGKILL node `i` and start it again on its port; resolves once the cluster is ok again. */
  restart(i: number): Promise<void>;
  close(): Promise<void>;
}

async function clusterOk(node: RedisServer): Promise<boolean> {
  try {
    return /cluster_state:ok/.test(String(await node.admin.call('CLUSTER', 'INFO')));
  } catch {
    return false;
  }
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`redis cluster: timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function startRedisCluster(): Promise<RedisClusterSetup> {
  const nodes: RedisServer[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      nodes.push(
        await startRedis({
          persist: true,
          // The bus port is chosen too: port + 10000 (the default) may be taken by another test's server.
          extraArgs: [
            '--cluster-enabled',
            'yes',
            '--cluster-node-timeout',
            '2000',
            '--cluster-port',
            String(await freePort()),
          ],
        }),
      );
    }
    await run('redis-cli', [
      '--cluster',
      'create',
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
    await until('cluster_state:ok on every node', async () => {
      for (const n of nodes) if (!(await clusterOk(n))) return false;
      return true;
    });
  } catch (err) {
    for (const n of nodes) await n.close();
    throw err;
  }
  const seeds = nodes.map((n) => `127.0.0.1:${n.port}`).join(',');
  const admin = new Cluster(
    nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    { clusterRetryStrategy: () => 100 },
  );
  admin.on('error', () => {});
  return {
    nodes,
    seeds,
    admin,
    async restart(i) {
      const node = nodes[i];
      if (node === undefined) throw new Error(`no node ${i}`);
      await node.stop();
      await node.start();
      await until('the restarted node to rejoin', async () => {
        for (const n of nodes) if (!(await clusterOk(n))) return false;
        return true;
      });
    },
    async close() {
      admin.disconnect();
      for (const n of nodes) await n.close();
    },
  };
}

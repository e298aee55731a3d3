// `router-admin store migrate --from <redis url>`: copy access keys, subject state and webhook ids (and,
// when asked, queued usage events) from another Redis into the configured store, each in the target's
// key layout: how a single endpoint's data moves into a Redis Cluster (admin/store-migration.ts).

import { Command, Option, UsageError } from 'clipanion';
import type { RouterConfig } from '../../../common/config-types.ts';
import { EXIT } from '../../../common/exit-codes.ts';
import {
  closeRedisClient,
  createKeyLayout,
  type KeyLayout,
  type Redis,
  redactAddr,
} from '../../../store/redis-client.ts';
import { AdminError } from '../../admin-error.ts';
import { ConfigCommand } from '../../command-base.ts';
import { configuredStoreSide, connectStore } from '../../store-connect.ts';
import { migrateStore } from '../../store-migration.ts';

interface Sides {
  readonly from: { client: Redis; keys: KeyLayout };
  readonly to: { client: Redis; keys: KeyLayout };
  readonly where: string;
  close(): Promise<void>;
}

export class MigrateStoreCommand extends ConfigCommand<Sides> {
  static override paths = [['store', 'migrate']];
  static override usage = Command.Usage({
    category: 'Store',
    description: 'Copy keys, subject state and webhook ids from another Redis into the configured store',
    details: `
      Reads the store at --from (one endpoint, the layout of a single endpoint, under --from-prefix or the
      configured key_prefix) and writes what is missing into the configured store in its own layout (hash
      tags when store.cluster is true). Running it again changes nothing. An access key that exists in the
      target with another secret is a conflict: reported, left alone, exit code 1. Cached balances are not
      copied. Usage events still queued at the source are reported and left there (exit code 1) unless
      --include-events moves them; stop the source's sidecars first, so that none delivers them as well.
    `,
    examples: [
      [
        'See what would be copied',
        '$0 store migrate --config cluster.yaml --from redis://old:6379 --dry-run',
      ],
      [
        'Copy, and move the queued usage events too',
        '$0 store migrate --config cluster.yaml --from redis://old:6379 --include-events',
      ],
    ],
  });

  from = Option.String('--from', {
    required: true,
    description: 'redis:// URL of the source store (one endpoint)',
  });
  fromPrefix = Option.String('--from-prefix', {
    description: 'key_prefix at the source (default: the configured one)',
  });
  dryRun = Option.Boolean('--dry-run', false, { description: 'Report only; write nothing' });
  includeEvents = Option.Boolean('--include-events', false, {
    description: 'Move queued usage events and dead letters to the target (shard 0)',
  });

  override validate(): void {
    if (!/^rediss?:\/\/[^,]+$/.test(this.from)) {
      throw new UsageError('--from wants one redis:// or rediss:// URL');
    }
  }

  async open(config: RouterConfig): Promise<Sides> {
    if (!config.store.enabled)
      throw new AdminError('store.enabled is false: there is no store to migrate into', EXIT.usage);
    const sourceConfig = {
      ...config.store,
      addr: this.from,
      cluster: false,
      sentinels: [],
      username: undefined,
      password: undefined,
      keyPrefix: this.fromPrefix ?? config.store.keyPrefix,
      billingStreamShards: 1,
    };
    const readyTimeoutMs = Math.max(2000, config.store.operationTimeoutMs * 4);
    const source = await connectStore(
      sourceConfig,
      {
        where: `source store ${redactAddr(this.from)}`,
        tls: sourceConfig.tls || /^rediss:/i.test(this.from),
        addrFix: '--from',
        authFix: 'the credentials in the --from URL (redis://user:password@host:port)',
      },
      { connectionName: 'router-admin-source', readyTimeoutMs },
    );
    let target: Awaited<ReturnType<typeof connectStore>>;
    try {
      target = await connectStore(config.store, configuredStoreSide(config.store), {
        connectionName: 'router-admin',
        readyTimeoutMs,
      });
    } catch (err) {
      source.client.disconnect();
      throw err;
    }
    return {
      from: { client: source.client, keys: createKeyLayout(sourceConfig) },
      to: { client: target.client, keys: target.keys },
      where: `${redactAddr(this.from)} -> ${redactAddr(config.store.addr, config.store)}`,
      async close() {
        await closeRedisClient(source.client);
        await closeRedisClient(target.client);
      },
    };
  }

  async run(sides: Sides, config: RouterConfig): Promise<number> {
    const r = await migrateStore(sides.from, sides.to, {
      dryRun: this.dryRun,
      includeEvents: this.includeEvents,
      group: config.store.billingConsumerGroup,
    });
    const would = this.dryRun ? 'would copy' : 'copied';
    const k = r.accessKeys;
    this.out(
      `access keys: ${k.created} ${this.dryRun ? 'would create' : 'created'}, ${k.unchanged} unchanged, ${k.conflicts.length} conflicts`,
    );
    for (const name of k.conflicts) this.out(`CONFLICT  ${name}: present in the target with another secret`);
    this.out(`subject states: ${r.subjects.copied} ${would}, ${r.subjects.kept} already there`);
    this.out(`webhook ids: ${r.webhookIds.copied} ${would}, ${r.webhookIds.kept} already there`);
    if (this.includeEvents)
      this.out(`usage events and dead letters: ${r.events.moved} ${this.dryRun ? 'would move' : 'moved'}`);
    else if (r.events.left > 0)
      this.out(
        `usage events and dead letters: ${r.events.left} left at the source (drain them, or --include-events)`,
      );
    this.out(`${this.dryRun ? 'dry run: ' : ''}${sides.where}`);
    return k.conflicts.length > 0 || r.events.left > 0 ? EXIT.failed : EXIT.ok;
  }
}

// How the store block becomes ioredis options: TLS names the server for SNI only when it is a host name.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { redisOptions } from '../../store/redis-client.ts';
import { testStoreConfig } from '../support/redis.ts';

test('rediss:// to a host name sends it as the TLS server name; to an IP address, no server name', () => {
  assert.deepEqual(redisOptions(testStoreConfig('rediss://cache.example.internal:6380')).tls, {
    servername: 'cache.example.internal',
  });
  for (const addr of ['rediss://10.1.2.3:6380', 'rediss://[::1]:6380']) {
    const opts = redisOptions(testStoreConfig(addr));
    assert.deepEqual(opts.tls, {}, addr);
  }
  assert.equal(redisOptions(testStoreConfig('redis://10.1.2.3:6379')).tls, undefined);
  assert.deepEqual(redisOptions(testStoreConfig('redis://10.1.2.3:6379', { tls: true })).tls, {});
});

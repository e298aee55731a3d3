// store.addr carries its user name and password percent-encoded: a "%" that starts no valid escape
// (`p%zz`, a literal `p%`) is a diagnostic of `router -t` at the key (or naming ROUTER_STORE_ADDR), and
// the Redis client refuses it with a clear error instead of a bare URIError. Neither prints the password.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatDiagnostic } from '../../common/config-diagnostics.ts';
import { loadConfigFromString } from '../../config/load.ts';
import { redisOptions } from '../../store/redis-client.ts';
import { testStoreConfig } from '../support/redis.ts';

function storeYaml(addr: string, extra = ''): string {
  return `store:\n  enabled: true\n  addr: "${addr}"\n  access_key_hash_secret: s\n${extra}`;
}

async function problems(text: string, env: Record<string, string> = {}): Promise<string[]> {
  const { diagnostics } = await loadConfigFromString(text, '/virtual/router.yaml', { env });
  return diagnostics.map(formatDiagnostic);
}

test('a malformed percent-escape in the password of store.addr: a diagnostic at the key, no password', async () => {
  for (const password of ['p%zz', 'p%', 'p%ff%fe']) {
    const found = await problems(storeYaml(`redis://:${password}@cache:6379`));
    assert.equal(found.length, 1, found.join('\n'));
    const line = found[0]!;
    assert.match(line, /^\/virtual\/router\.yaml:3:9: /);
    assert.match(line, /password in store\.addr/);
    assert.match(line, /%25/);
    assert.ok(!line.includes(password), line);
  }
  const user = await problems(storeYaml('redis://us%er:pw@cache:6379'));
  assert.equal(user.length, 1, user.join('\n'));
  assert.match(user[0]!, /user name in store\.addr/);
  assert.ok(!user[0]!.includes('us%er'));
});

test('set by ROUTER_STORE_ADDR, the diagnostic names the variable', async () => {
  const found = await problems(storeYaml('redis://cache:6379'), {
    ROUTER_STORE_ADDR: 'redis://:a%b@cache:6379',
  });
  assert.equal(found.length, 1, found.join('\n'));
  assert.match(found[0]!, /set by environment variable ROUTER_STORE_ADDR/);
  assert.ok(!found[0]!.includes('a%b'));
});

test('valid escapes, and a password given in store.password instead, are accepted', async () => {
  assert.deepEqual(await problems(storeYaml('redis://user:p%25zz%40x@cache:6379')), []);
  // The URL's password is not used when store.password is set.
  assert.deepEqual(await problems(storeYaml('redis://:p%zz@cache:6379', '  password: real\n')), []);
  const options = redisOptions(testStoreConfig('redis://user:p%25zz%40x@cache:6379'));
  assert.equal(options.password, 'p%zz@x');
  assert.equal(options.username, 'user');
});

test('the Redis client refuses a malformed password with a clear error, never a bare URIError', () => {
  for (const addr of ['redis://:p%zz@cache:6379', 'redis://us%er@cache:6379']) {
    assert.throws(
      () => redisOptions(testStoreConfig(addr)),
      (err: unknown) => {
        assert.ok(err instanceof Error);
        assert.ok(!(err instanceof URIError), `${err.name}: ${err.message}`);
        assert.match(err.message, /store\.addr.*%25/);
        assert.ok(!err.message.includes('%zz') && !err.message.includes('us%er'), err.message);
        return true;
      },
    );
  }
});

test('an address that is no URL is a diagnostic too, without the address', async () => {
  const found = await problems(storeYaml('redis://:secret@[::1'));
  assert.equal(found.length, 1, found.join('\n'));
  assert.match(found[0]!, /:3:9: store\.addr is not a valid URL$/);
  assert.throws(
    () => redisOptions(testStoreConfig('redis://:secret@[::1')),
    /^Error: store\.addr is not a valid URL$/,
  );
});

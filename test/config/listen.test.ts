import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatListenAddress, parseListenAddress } from '../../config/listen.ts';

test('host:port forms', () => {
  assert.deepEqual(parseListenAddress('127.0.0.1:8080'), { host: '127.0.0.1', port: 8080 });
  assert.deepEqual(parseListenAddress('localhost:0'), { host: 'localhost', port: 0 });
  assert.deepEqual(parseListenAddress('[::1]:443'), { host: '::1', port: 443 });
  assert.deepEqual(parseListenAddress(':9000'), { host: '0.0.0.0', port: 9000 });
  assert.equal(parseListenAddress('127.0.0.1'), undefined);
  assert.equal(parseListenAddress('::1:80'), undefined);
  assert.equal(parseListenAddress('host:65536'), undefined);
  assert.equal(parseListenAddress('host:-1'), undefined);
});

test('formatting round-trips', () => {
  for (const text of ['127.0.0.1:8080', '[::1]:443']) {
    const parsed = parseListenAddress(text);
    assert.ok(parsed);
    assert.equal(formatListenAddress(parsed), text);
  }
});

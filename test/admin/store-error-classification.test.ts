// classifyStoreError and storeFailureMessage against the error shapes ioredis and Node produce: TLS
// verification codes (ERR_TLS_CERT_ALTNAME_INVALID, UNABLE_TO_VERIFY_LEAF_SIGNATURE,
// SELF_SIGNED_CERT_IN_CHAIN, DEPTH_ZERO_SELF_SIGNED_CERT, CERT_HAS_EXPIRED), NOAUTH / WRONGPASS replies
// (also inside a cluster's ClusterAllFailedError), network errors and a dual-stack AggregateError; and the
// message of each kind naming its fix without credentials. store-errors.test.ts uses real servers.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReplyError } from 'ioredis';
import {
  classifyStoreError,
  configuredStoreSide,
  type StoreFailure,
  storeFailureMessage,
} from '../../admin/store-connect.ts';
import { testStoreConfig } from '../support/redis.ts';

function nodeError(message: string, code: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(message), { code, ...extra });
}

test('classifyStoreError: TLS certificate errors as Node reports them', () => {
  const altname = classifyStoreError(
    nodeError(
      "Hostname/IP does not match certificate's altnames: IP: 10.0.0.5 is not in the cert's list: ",
      'ERR_TLS_CERT_ALTNAME_INVALID',
      {
        reason: "IP: 10.0.0.5 is not in the cert's list: ",
        host: '10.0.0.5',
        cert: { subjectaltname: 'DNS:redis.internal', subject: { CN: 'redis.internal' } },
      },
    ),
  );
  assert.deepEqual(altname, {
    kind: 'tls',
    code: 'ERR_TLS_CERT_ALTNAME_INVALID',
    reason: 'the certificate is not valid for this host name',
    host: '10.0.0.5',
    certNames: 'DNS:redis.internal',
  });
  for (const [code, message, reason] of [
    [
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      'unable to verify the first certificate',
      'unable to verify the first certificate',
    ],
    [
      'SELF_SIGNED_CERT_IN_CHAIN',
      'self-signed certificate in certificate chain',
      'self-signed certificate in certificate chain',
    ],
    [
      'DEPTH_ZERO_SELF_SIGNED_CERT',
      'self-signed certificate; if the root CA is installed locally, try running Node.js with --use-system-ca',
      'self-signed certificate',
    ],
    ['CERT_HAS_EXPIRED', 'certificate has expired', 'certificate has expired'],
  ] as const) {
    assert.deepEqual(classifyStoreError(nodeError(message, code)), { kind: 'tls', code, reason }, code);
  }
});

test('classifyStoreError: authentication replies, also inside a cluster error', () => {
  assert.deepEqual(classifyStoreError(new ReplyError('NOAUTH Authentication required.')), {
    kind: 'auth',
    code: 'NOAUTH',
    reason: 'it requires a password and none was given',
  });
  const wrongpass = new ReplyError('WRONGPASS invalid username-password pair or user is disabled.');
  assert.equal(classifyStoreError(wrongpass).code, 'WRONGPASS');
  assert.equal(classifyStoreError(new ReplyError('ERR invalid password')).kind, 'auth');
  const cluster = Object.assign(new Error('Failed to refresh slots cache.'), {
    name: 'ClusterAllFailedError',
    lastNodeError: wrongpass,
  });
  assert.equal(classifyStoreError(cluster).kind, 'auth');
});

test('classifyStoreError: network errors, a dual-stack AggregateError, and no answer at all', () => {
  assert.deepEqual(classifyStoreError(nodeError('connect ECONNREFUSED 127.0.0.1:1', 'ECONNREFUSED')), {
    kind: 'unreachable',
    code: 'ECONNREFUSED',
    reason: 'connection refused',
  });
  assert.equal(classifyStoreError(nodeError('connect ETIMEDOUT', 'ETIMEDOUT')).kind, 'unreachable');
  assert.equal(
    classifyStoreError(nodeError('getaddrinfo ENOTFOUND x', 'ENOTFOUND')).reason,
    'host not found',
  );
  const aggregate = new AggregateError([
    nodeError('connect ECONNREFUSED ::1:6379', 'ECONNREFUSED'),
    nodeError('connect ECONNREFUSED 127.0.0.1:6379', 'ECONNREFUSED'),
  ]);
  assert.equal(classifyStoreError(aggregate).code, 'ECONNREFUSED');
  assert.deepEqual(classifyStoreError(undefined), {
    kind: 'unreachable',
    code: undefined,
    reason: 'no answer',
  });
  assert.equal(classifyStoreError(new ReplyError('ERR unknown command')).kind, 'other');
});

test('storeFailureMessage names the fix of each kind, and no credentials', () => {
  const side = configuredStoreSide(
    testStoreConfig('rediss://admin:hunter2@redis.internal:6380', { password: 'hunter3' }),
  );
  const message = (f: StoreFailure): string => storeFailureMessage(side, f, 2000);
  const all: string[] = [];
  const auth = message({ kind: 'auth', code: 'WRONGPASS', reason: 'wrong password' });
  assert.match(auth, /ROUTER_STORE_PASSWORD \(or store\.password\)/);
  assert.match(auth, /ROUTER_STORE_USERNAME \(or store\.username\)/);
  all.push(auth);
  const untrusted = message({ kind: 'tls', code: 'SELF_SIGNED_CERT_IN_CHAIN', reason: 'self-signed' });
  assert.match(untrusted, /^TLS verification of the store rediss:\/\/redis\.internal:6380 failed/);
  assert.match(untrusted, /NODE_EXTRA_CA_CERTS=\/path\/to\/ca\.pem/);
  assert.match(untrusted, /store\.tls/);
  all.push(untrusted);
  const noClientCert = message({
    kind: 'tls',
    code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
    reason: 'tlsv13 alert certificate required',
  });
  assert.match(noClientCert, /asks for a client certificate/);
  assert.match(noClientCert, /store\.tls_cert_file and store\.tls_key_file/);
  assert.doesNotMatch(noClientCert, /speaks TLS/);
  all.push(noClientCert);
  const altname = message({
    kind: 'tls',
    code: 'ERR_TLS_CERT_ALTNAME_INVALID',
    reason: 'x',
    host: '10.0.0.5',
    certNames: 'DNS:redis.internal',
  });
  assert.match(altname, /not valid for the host 10\.0\.0\.5 .*the certificate names DNS:redis\.internal/);
  assert.match(altname, /store\.addr \(ROUTER_STORE_ADDR\)/);
  all.push(altname);
  const expired = message({ kind: 'tls', code: 'CERT_HAS_EXPIRED', reason: 'certificate has expired' });
  assert.match(expired, /Renew the certificate/);
  all.push(expired);
  const timeout = message({ kind: 'unreachable', code: undefined, reason: 'no answer' });
  assert.match(timeout, /no answer within 2000 ms; check store\.addr \(ROUTER_STORE_ADDR\)/);
  assert.match(timeout, /check that the port speaks TLS/);
  all.push(timeout);
  for (const m of all) {
    assert.equal(m.includes('hunter'), false, m);
    assert.match(m, /nothing was changed$/);
  }
  const sentinel = configuredStoreSide(
    testStoreConfig('redis://x', { sentinels: [{ host: 's1', port: 26379 }], sentinelName: 'main' }),
  );
  assert.match(
    storeFailureMessage(sentinel, { kind: 'unreachable', code: 'ECONNREFUSED', reason: 'refused' }, 1),
    /store sentinel main@s1:26379: .*store\.sentinels \(ROUTER_STORE_SENTINELS\)/,
  );
});

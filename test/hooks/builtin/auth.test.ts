// File-mode authentication: the digest memo must never change a decision (unknown keys stay unknown,
// expiry is checked on every request, the master key stays the master key), however often a secret
// is presented and however many distinct secrets fill the memo.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AccessKeyEntry } from '../../../common/config-types.ts';
import { GatewayError } from '../../../common/errors.ts';
import { createAuthenticator, hashAccessKey } from '../../../hooks/builtin/auth.ts';

function entry(name: string, over: Partial<AccessKeyEntry> = {}): AccessKeyEntry {
  return {
    name,
    value: `sk-${name}-0123456789`,
    hash: undefined,
    subjectType: undefined,
    subjectId: undefined,
    status: 'active',
    expiresAt: undefined,
    createdAt: undefined,
    ...over,
  };
}

function rejects(fn: () => unknown, message: RegExp): void {
  assert.throws(
    fn,
    (err: unknown) =>
      err instanceof GatewayError && err.code === 'invalid_api_key' && message.test(err.message),
  );
}

test('a key is accepted every time it is presented; an unknown one is refused every time', () => {
  const auth = createAuthenticator({
    keys: { file: undefined, accessKeys: [entry('alice')], providerKeys: new Map() },
    masterKey: 'master-secret-0123456789',
    subjectType: 'user',
    fallbackSubjectId: '',
    hashSecret: undefined,
  });
  for (let i = 0; i < 3; i++) {
    const p = auth.authenticate('sk-alice-0123456789');
    assert.equal(p.keyName, 'alice');
    assert.equal(p.isMaster, false);
    rejects(() => auth.authenticate('sk-mallory-0123456789'), /Invalid access key/);
    assert.equal(auth.authenticate('master-secret-0123456789').isMaster, true);
  }
  rejects(() => auth.authenticate(undefined), /Missing access key/);
});

test('expiry is checked on every request, also for a secret whose digest is remembered', () => {
  let now = 1_000;
  const auth = createAuthenticator({
    keys: { file: undefined, accessKeys: [entry('bob', { expiresAt: 2_000 })], providerKeys: new Map() },
    masterKey: undefined,
    subjectType: 'user',
    fallbackSubjectId: '',
    hashSecret: undefined,
    now: () => now,
  });
  assert.equal(auth.authenticate('sk-bob-0123456789').keyName, 'bob');
  now = 2_000;
  rejects(() => auth.authenticate('sk-bob-0123456789'), /expired/);
});

test('revoked and hashed keys: decisions hold after many distinct secrets have filled the memo', () => {
  const hashSecret = 'hash-secret-0123456789';
  const auth = createAuthenticator({
    keys: {
      file: undefined,
      accessKeys: [
        entry('carol', { status: 'revoked' }),
        entry('dave', { value: undefined, hash: hashAccessKey(hashSecret, 'sk-dave-0123456789') }),
      ],
      providerKeys: new Map(),
    },
    masterKey: undefined,
    subjectType: 'user',
    fallbackSubjectId: '',
    hashSecret,
  });
  rejects(() => auth.authenticate('sk-carol-0123456789'), /revoked/);
  assert.equal(auth.authenticate('sk-dave-0123456789').keyName, 'dave');
  // More distinct secrets than the memo keeps: the oldest (dave's, carol's) are dropped and recomputed.
  for (let i = 0; i < 10_050; i++) rejects(() => auth.authenticate(`sk-junk-${i}`), /Invalid access key/);
  rejects(() => auth.authenticate('sk-carol-0123456789'), /revoked/);
  assert.equal(auth.authenticate('sk-dave-0123456789').keyName, 'dave');
});

// The memo of presented secrets keeps only secrets of a key's length: a client sending distinct
// header-sized wrong keys must not leave 10,000 of them in the heap (docs/benchmarks.md, "Soak").

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createAuthenticator,
  MAX_REMEMBERED_SECRET_LENGTH,
  rememberBySecret,
} from '../../../hooks/builtin/auth.ts';

test('a secret of a key length is derived once; a longer one every time, with the same answer', () => {
  let calls = 0;
  const derive = rememberBySecret((s: string) => {
    calls++;
    return s.length;
  });
  const short = 'k'.repeat(MAX_REMEMBERED_SECRET_LENGTH);
  assert.equal(derive(short), short.length);
  assert.equal(derive(short), short.length);
  assert.equal(calls, 1);
  const long = 'k'.repeat(MAX_REMEMBERED_SECRET_LENGTH + 1);
  assert.equal(derive(long), long.length);
  assert.equal(derive(long), long.length);
  assert.equal(calls, 3);
});

test('a configured key longer than the memo keeps is still accepted, and a wrong long one refused', () => {
  const value = `sk-${'v'.repeat(400)}`;
  const auth = createAuthenticator({
    keys: {
      file: undefined,
      accessKeys: [
        {
          name: 'long',
          value,
          hash: undefined,
          subjectType: undefined,
          subjectId: undefined,
          status: 'active',
          expiresAt: undefined,
          createdAt: undefined,
        },
      ],
      providerKeys: new Map(),
    },
    masterKey: undefined,
    subjectType: 'user',
    fallbackSubjectId: '',
    hashSecret: undefined,
  });
  for (let i = 0; i < 3; i++) assert.equal(auth.authenticate(value).keyName, 'long');
  assert.throws(() => auth.authenticate(`${value}x`), /Invalid access key/);
});

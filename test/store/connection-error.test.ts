// isConnectionError tells a command the server refused (a Redis reply error) from a connection failure
// by the reply error's class: redis-errors names each subclass after itself, so a name test would take a
// subclass's refusal for a lost connection.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReplyError } from 'ioredis';
import { isConnectionError } from '../../store/redis-client.ts';

class RefusedReply extends ReplyError {
  constructor(message: string) {
    super(message);
  }
}

test('a reply error, of ioredis or a subclass, is a connection error only when the server is not ready', () => {
  assert.equal(new RefusedReply('x').name, 'RefusedReply');
  for (const make of [(m: string) => new ReplyError(m), (m: string) => new RefusedReply(m)]) {
    assert.equal(
      isConnectionError(make('WRONGTYPE Operation against a key holding the wrong kind of value')),
      false,
    );
    assert.equal(isConnectionError(make('NOSCRIPT No matching script')), false);
    for (const busy of ['LOADING Redis is loading', 'BUSY Redis is busy', 'MASTERDOWN Link down', 'TRYAGAIN'])
      assert.equal(isConnectionError(make(busy)), true, busy);
  }
  assert.equal(isConnectionError(new Error('Connection is closed.')), true);
  assert.equal(isConnectionError('not an error'), false);
});

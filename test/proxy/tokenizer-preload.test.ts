// The gateway loads the estimate's encodings before it listens: a request that needs an estimate (a
// stream its client leaves after the first chunk, with a prompt of 150 KB without spaces) loads none.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadedEncodings } from '../../hooks/usage/estimate.ts';
import { ACCESS_KEY, startStack } from '../support/stack.ts';

test('encodings are loaded before the gateway listens, none on the request path', async () => {
  assert.deepEqual(loadedEncodings(), [], 'nothing in this file loads an encoding before the gateway');
  const stack = await startStack();
  try {
    const atListen = [...loadedEncodings()].sort();
    assert.deepEqual(atListen, ['cl100k_base', 'o200k_base']);
    const controller = new AbortController();
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'gpt-4o-mini',
        stream: true,
        messages: [{ role: 'user', content: 'x'.repeat(150 * 1024) }],
      }),
      signal: controller.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await reader.read().catch(() => undefined);
    // Readiness answers while the estimate runs (it runs in slices); the encodings are the same ones.
    assert.equal((await fetch(`${stack.url}/healthz`)).status, 200);
    assert.deepEqual([...loadedEncodings()].sort(), atListen);
  } finally {
    await stack.close();
  }
});

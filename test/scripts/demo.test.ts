// `npm run demo` as a user runs it: every step prints what it shows, and the balance walk-through goes
// 402 -> webhook -> top-up -> served; exit code 0.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../support/stack.ts';

test('npm run demo: three families, a stream, a tool call, a cross-family call, the balance walk-through', async () => {
  const child = spawn(process.execPath, [join(ROOT, 'scripts/demo.ts')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    out += c.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  assert.equal(code, 0, out);
  for (const line of [
    /OpenAI SDK, gpt-5\.4-mini: +Echo: Say hello/,
    /Anthropic SDK, claude-haiku-5-5: +Echo: Say hello/,
    /Gemini SDK, gemini-3\.8-flash: +Echo: Say hello/,
    /stream, \d+ chunks \(OpenAI SDK -> Claude\): Echo: Count to five/,
    /tool call: +get_weather\(\{.*Paris/,
    /Anthropic SDK asking gpt-5\.4-mini: +Echo/,
    /x-router-provider: deepseek: +Echo/,
    /webhook from the billing service: +wallet\.insufficient_balance -> gateway answered 204/,
    /the next request: +402 .*insufficient/,
    /top-up to \$5\.00, webhook: +wallet\.balance_changed -> gateway answered 204/,
    /the request after the top-up: +Echo: Am I back/,
    /Demo complete\./,
  ])
    assert.match(out, line);
});

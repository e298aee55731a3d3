// The log of a real gateway process: one JSON line per request with the request id, provider, model,
// status and durations; no Authorization value, access key, upstream key or prompt text anywhere; the
// level comes from the configuration (ROUTER_LOG_LEVEL overrides it); SIGHUP reloads are logged, and a
// refused one names its errors.

import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import {
  ACCESS_KEY,
  type GatewayFiles,
  type GatewayProcess,
  spawnGateway,
  writeGatewayFiles,
} from '../deploy/support.ts';
import { freePort } from '../support/nginx.ts';

const PROMPT = 'zebra-quartz prompt text that must never be logged';

let sim: UpstreamSim;
let files: GatewayFiles;

before(async () => {
  sim = await startUpstreamSim();
  files = await writeGatewayFiles({ simUrl: sim.url, logLevel: 'info' });
});

after(async () => {
  await sim?.close();
  await files?.remove();
});

async function stop(gw: GatewayProcess): Promise<void> {
  gw.child.kill('SIGTERM');
  assert.equal(await gw.exited, 0);
}

test('request lines carry id, provider, model, status and durations; secrets and prompts never appear', async () => {
  const gw = await spawnGateway(files);
  try {
    const ok = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${ACCESS_KEY}`,
        'content-type': 'application/json',
        'x-router-request-id': 'log-test-1',
      },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: PROMPT }] }),
    });
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
    const failed = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'x-api-key': ACCESS_KEY,
        'content-type': 'application/json',
        'x-router-request-id': 'log-test-2',
        'x-router-provider': 'openai',
      },
      body: JSON.stringify({ model: 'sim-fail-500', messages: [{ role: 'user', content: PROMPT }] }),
    });
    assert.equal(failed.status, 500);
    await failed.arrayBuffer();
    const gemini = await fetch(`${gw.url}/v1beta/models/gemini-3.8-flash:generateContent?key=${ACCESS_KEY}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-router-request-id': 'log-test-3' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: PROMPT }] }] }),
    });
    assert.equal(gemini.status, 200);
    await gemini.arrayBuffer();
    const denied = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer ak_wrong_secret_value', 'x-router-request-id': 'log-test-4' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: PROMPT }] }),
    });
    assert.equal(denied.status, 401);
    await denied.arrayBuffer();

    const line3 = await gw.waitForLine((l) => l.msg === 'request' && l.reqId === 'log-test-4');
    assert.equal(line3.status, 401);
    const byId = (id: string) => gw.lines.find((l) => l.msg === 'request' && l.reqId === id);
    const first = byId('log-test-1');
    assert.ok(first);
    assert.equal(first.provider, 'openai');
    assert.equal(first.model, 'gpt-4o-mini');
    assert.equal(first.api, 'chat.completions');
    assert.equal(first.stream, false);
    assert.equal(first.status, 200);
    assert.equal(first.level, 30);
    assert.equal(typeof first.durationMs, 'number');
    assert.equal(typeof first.upstreamTtfbMs, 'number');
    assert.ok((first.upstreamTtfbMs as number) <= (first.durationMs as number));
    assert.equal(typeof first.time, 'number');
    assert.equal(byId('log-test-2')?.status, 500);
    assert.equal(byId('log-test-3')?.provider, 'gemini');
    assert.equal(byId('log-test-3')?.api, 'native.generateContent');

    await stop(gw);
    const out = gw.stdout();
    for (const secret of [
      ACCESS_KEY,
      'ak_wrong_secret_value',
      'sim-openai-key',
      'sim-gemini-key',
      PROMPT,
      'zebra',
    ])
      assert.ok(!out.includes(secret), `the log contains ${secret}`);
    assert.ok(!/bearer /i.test(out), 'an Authorization value is in the log');
  } finally {
    gw.kill();
  }
});

test('the level comes from configuration: ROUTER_LOG_LEVEL=warn drops request lines', async () => {
  const quiet = { ...files, env: { ...files.env, ROUTER_LOG_LEVEL: 'warn' } };
  // "router listening" is an info line: wait for the port through /healthz instead.
  const gw = await spawnGatewayQuiet(quiet);
  try {
    const res = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${ACCESS_KEY}` } });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    await stop(gw);
    assert.ok(
      gw.lines.every((l) => (l.level ?? 0) >= 40),
      'an info line was written at level warn',
    );
  } finally {
    gw.kill();
  }
});

test('SIGHUP: a broken provider file is refused with its errors logged; a valid one is applied', async () => {
  const gw = await spawnGateway(files);
  const file = join(files.providersDir, 'openai.conf');
  const original = await readFile(file, 'utf8');
  try {
    await writeFile(file, 'provider "openai" { defaults { oops');
    gw.child.kill('SIGHUP');
    const refused = await gw.waitForLine((l) => l.msg === 'reload refused: configuration invalid');
    assert.match(String(refused.diagnostic), /openai\.conf:\d+:\d+: /);
    assert.equal(refused.level, 50);
    const still = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'still there?' }] }),
    });
    assert.equal(still.status, 200);
    await still.arrayBuffer();

    await writeFile(file, original);
    gw.child.kill('SIGHUP');
    await gw.waitForLine((l) => l.msg === 'configuration reloaded');
    await stop(gw);
  } finally {
    await writeFile(file, original);
    gw.kill();
  }
});

/** At level warn there is no "router listening" line: give the gateway a fixed free port. */
async function spawnGatewayQuiet(quiet: GatewayFiles): Promise<GatewayProcess> {
  const port = await freePort();
  const configFile = join(quiet.dir, 'router-quiet.yaml');
  const text = await readFile(quiet.configFile, 'utf8');
  await writeFile(configFile, text.replace('listen: 127.0.0.1:0', `listen: 127.0.0.1:${port}`));
  return spawnGateway({ ...quiet, configFile }, [], `http://127.0.0.1:${port}`);
}

// Stored responses with `workers: 2` in file mode, through a real `router` process: the primary holds
// them for both workers (proxy/workers), so a turn served by one worker continues a response the other
// stored. Each request goes on a new connection, which the kernel hands to either worker; the log's
// `pid` of each request line shows which one served it, and the case needs some pairs split over both.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { spawnLogged, waitUntil } from '../support/billing-stack.ts';
import {
  ACCESS_KEY,
  MODELS_FILE,
  PRICING_FILE,
  PROVIDERS_DIR,
  simProviderEnv,
  TRUST_LOOPBACK_IDS,
} from '../support/stack.ts';

let upstream: UpstreamSim;
let dir: string;

before(async () => {
  upstream = await startUpstreamSim();
  dir = await mkdtemp(join(tmpdir(), 'router-response-workers-'));
});
after(async () => {
  await upstream?.close();
  await rm(dir, { recursive: true, force: true });
});

/** POST on a connection of its own, so that either worker may take it. */
async function post(url: string, body: unknown, id: string): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${url}/v1/responses`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      connection: 'close',
      'x-router-request-id': id,
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

test('workers: 2: a response stored by one worker is continued on the other', async (t) => {
  const file = join(dir, 'router.yaml');
  await writeFile(
    file,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      `pricing: ${PRICING_FILE}`,
      'log: { level: info }',
      TRUST_LOOPBACK_IDS,
      '',
    ].join('\n'),
  );
  const gw = await spawnLogged(
    'proxy/cli.ts',
    ['-c', file, '--no-sidecar'],
    { ...simProviderEnv(upstream.url), ROUTER_WORKERS: '2' },
    'router listening',
    { group: true },
  );
  t.after(async () => {
    gw.killAll();
    await gw.exited;
  });
  await waitUntil(
    () => gw.lines.filter((l) => l.msg === 'worker listening').length >= 2,
    'both workers listening',
  );
  const servedBy = (id: string) => gw.lines.find((l) => l.msg === 'request' && l.reqId === id)?.pid;
  let split = 0;
  for (let i = 0; i < 16; i++) {
    const model = i % 2 === 0 ? 'claude-sonnet-5' : 'gemini-3.8-flash';
    const first = await post(gw.url, { model, input: `turn one ${i}` }, `rw-${i}-a`);
    assert.equal(first.status, 200, JSON.stringify(first.json));
    const body = first.json as { id: string; output: { id: string }[] };
    const second = await post(
      gw.url,
      {
        model,
        previous_response_id: body.id,
        input: [
          { type: 'item_reference', id: body.output[0]!.id },
          { role: 'user', content: 'again' },
        ],
      },
      `rw-${i}-b`,
    );
    assert.equal(second.status, 200, JSON.stringify(second.json));
    await waitUntil(
      () => servedBy(`rw-${i}-a`) !== undefined && servedBy(`rw-${i}-b`) !== undefined,
      'both request lines',
    );
    if (servedBy(`rw-${i}-a`) !== servedBy(`rw-${i}-b`)) split++;
  }
  assert.ok(split > 0, 'no pair was served by two workers: the kernel sent every connection to one');
});

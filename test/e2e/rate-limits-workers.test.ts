// File mode with `workers: 2`: a real `router` process whose primary keeps the rate-limit counters for
// both workers, so a key's limit from the keys file holds across the host, not per worker.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { type ChildGateway, spawnLogged, waitUntil } from '../support/billing-stack.ts';
import { MODELS_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const SECRET = 'ak_rl_workers_limited_secret';

let upstream: UpstreamSim;
let dir: string;
let gw: ChildGateway;

before(async () => {
  upstream = await startUpstreamSim();
  dir = await mkdtemp(join(tmpdir(), 'router-rl-workers-'));
  const keysFile = join(dir, 'keys.yaml');
  await writeFile(
    keysFile,
    [
      'access_keys:',
      '  - name: limited',
      `    value: ${SECRET}`,
      '    limits: { requests_per_minute: 10 }',
      '',
    ].join('\n'),
  );
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      `keys: ${keysFile}`,
      'log: { level: info }',
      '',
    ].join('\n'),
  );
  gw = await spawnLogged(
    'proxy/cli.ts',
    ['-c', configFile, '--no-sidecar'],
    { ...simProviderEnv(upstream.url), ROUTER_WORKERS: '2' },
    'router listening',
    { group: true },
  );
  // `router listening` comes once one worker listens; both must.
  await waitUntil(
    async () => {
      const res = await fetch(`${gw.url}/readyz`);
      const body = (await res.json()) as { workers?: { listening: number } };
      return body.workers?.listening === 2;
    },
    'both workers listening',
    60_000,
  );
  await waitUntil(
    () => gw.lines.filter((l) => l.msg === 'worker listening').length >= 2,
    'both workers logged as listening',
  );
});

after(async () => {
  gw?.killAll();
  await gw?.exited;
  await upstream?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A chat request on a connection of its own, so that the requests spread over both workers. */
function chatOnNewConnection(url: string): Promise<{ status: number; id: string; body: string }> {
  const body = JSON.stringify({ model: 'gpt-5.4-mini', messages: [{ role: 'user', content: 'hi' }] });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${url}/v1/chat/completions`,
      {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            id: String(res.headers['x-router-request-id']),
            body: text,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

test('workers: 2, keys file limit 10 per minute: 30 concurrent requests admit exactly 10 across both workers', async () => {
  const replies = await Promise.all(Array.from({ length: 30 }, () => chatOnNewConnection(gw.url)));
  const statuses = replies.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 200).length, 10, `statuses ${statuses}`);
  assert.equal(statuses.filter((s) => s === 429).length, 20);
  for (const r of replies.filter((r) => r.status === 429)) {
    assert.equal((JSON.parse(r.body) as { error: { code: string } }).error.code, 'rate_limit_requests');
  }
  // Both workers took some of the 30: with a count of its own each would have admitted more than 10
  // together.
  const ids = new Set(replies.map((r) => r.id));
  const logged = () => gw.lines.filter((l) => l.msg === 'request' && ids.has(String(l.reqId)));
  await waitUntil(() => logged().length === 30, 'every request logged');
  assert.equal(new Set(logged().map((l) => l.pid)).size, 2, 'requests served by both workers');
});

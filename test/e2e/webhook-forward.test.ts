// Billing webhooks sent to the gateway's own port, through a real `router` process that supervises its
// sidecar: applied when sent the moment the gateway listens (the sidecar still starting), while the
// sidecar restarts after a kill -9, chunked or with `Expect: 100-continue`; /readyz fails until the
// sidecar is up; a sidecar that is really down gets a 503 whose JSON body says so.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { signWebhookBody } from '../../sidecar/webhook-signature.ts';
import { type BillingSim, startBillingSim } from '../../sim/billing/server.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { type ChildGateway, spawnLogged, waitUntil } from '../support/billing-stack.ts';
import { freePort } from '../support/nginx.ts';
import { MODELS_FILE, PRICING_FILE, PROVIDERS_DIR, simProviderEnv } from '../support/stack.ts';

const SECRET = 'whsec_forward_test';
const PATH = '/internal/billing/webhook';

let upstream: UpstreamSim;
let billing: BillingSim;
let dir: string;

before(async () => {
  upstream = await startUpstreamSim();
  billing = await startBillingSim({
    apiKey: 'bk',
    projectId: 'p',
    ruleSets: { rs: 'published' },
    wallets: { 'api_key:client_a': '10' },
  });
  dir = await mkdtemp(join(tmpdir(), 'router-webhook-forward-'));
});
after(async () => {
  await upstream?.close();
  await billing?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A configuration with balance enforcement whose sidecar listens on `sidecarPort`. */
async function writeConfig(name: string, sidecarPort: number): Promise<string> {
  const file = join(dir, `${name}.yaml`);
  await writeFile(
    file,
    [
      'listen: 127.0.0.1:0',
      `providers_dir: ${PROVIDERS_DIR}`,
      `models: ${MODELS_FILE}`,
      `pricing: ${PRICING_FILE}`,
      // Long enough for a restart under a loaded CI machine: the test asserts the wait, not its length.
      'sidecar: { webhook_wait_ms: 60000 }',
      'billing:',
      '  enabled: true',
      `  base_url: ${billing.url}`,
      '  project_id: p',
      '  api_key: bk',
      '  extractor_rule_set_id: rs',
      `  outbox_dir: ${join(dir, name, 'outbox')}`,
      `  state_dir: ${join(dir, name, 'state')}`,
      `  listen: 127.0.0.1:${sidecarPort}`,
      '  balance_enforcement:',
      '    enabled: true',
      `    webhook_secret: ${SECRET}`,
      '',
    ].join('\n'),
  );
  return file;
}

async function startRouter(
  t: { after: (fn: () => unknown) => void },
  name: string,
  args: string[] = [],
): Promise<ChildGateway> {
  const configFile = await writeConfig(name, await freePort());
  const gw = await spawnLogged(
    'proxy/cli.ts',
    ['-c', configFile, ...args],
    simProviderEnv(upstream.url),
    'router listening',
  );
  t.after(async () => {
    if (gw.child.exitCode === null && gw.child.signalCode === null) {
      gw.child.kill('SIGTERM');
      await gw.exited;
    }
  });
  return gw;
}

/** A correctly signed `wallet.balance_changed` body and its headers. */
function signed(): { body: string; headers: Record<string, string> } {
  const body = JSON.stringify({
    id: `evt_${randomUUID()}`,
    type: 'wallet.balance_changed',
    data: { subject: { subject_type: 'api_key', subject_id: 'client_a' } },
  });
  const ts = Math.floor(Date.now() / 1000);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'x-billing-webhook-timestamp': String(ts),
      'x-billing-webhook-signature': signWebhookBody(SECRET, ts, body),
    },
  };
}

async function sendWebhook(url: string): Promise<{ status: number; text: string }> {
  const { body, headers } = signed();
  const res = await fetch(`${url}${PATH}`, { method: 'POST', headers, body });
  return { status: res.status, text: await res.text() };
}

async function readyz(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** The live child processes of `parent` whose command line runs the sidecar. */
async function sidecarPid(parent: number): Promise<number | undefined> {
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = await readFile(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) !== parent || fields[0] === 'Z') continue;
      if ((await readFile(`/proc/${name}/cmdline`, 'utf8')).includes('sidecar-main.ts')) return Number(name);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

test('a webhook sent the moment the gateway listens is applied; /readyz waits for the sidecar', async (t) => {
  const gw = await startRouter(t, 'at-start');
  // The sidecar was spawned a moment ago and is still booting.
  const [first, early] = await Promise.all([sendWebhook(gw.url), readyz(gw.url)]);
  assert.equal(first.status, 204, first.text);
  assert.deepEqual((early.body.sidecar as { supervised: boolean }).supervised, true);
  const state = (early.body.sidecar as { state: string }).state;
  assert.equal(early.status, state === 'up' ? 200 : 503, JSON.stringify(early.body));
  assert.equal(early.body.ready, state === 'up');
  await waitUntil(async () => (await readyz(gw.url)).status === 200, 'the gateway to be ready');
  const ready = await readyz(gw.url);
  assert.deepEqual(ready.body.sidecar, { supervised: true, state: 'up' });
});

test('sidecar killed: /readyz fails until it is back, and a webhook meanwhile waits for it', async (t) => {
  const gw = await startRouter(t, 'restart');
  await waitUntil(async () => (await readyz(gw.url)).status === 200, 'the gateway to be ready');
  const pid = await sidecarPid(gw.child.pid as number);
  assert.ok(pid !== undefined);
  process.kill(pid, 'SIGKILL');
  await waitUntil(async () => (await readyz(gw.url)).status === 503, '/readyz to fail');
  const down = await readyz(gw.url);
  assert.notEqual((down.body.sidecar as { state: string }).state, 'up');
  assert.equal(down.body.ready, false);
  const sent = await sendWebhook(gw.url);
  assert.equal(sent.status, 204, sent.text);
  await waitUntil(async () => (await readyz(gw.url)).status === 200, 'the gateway to be ready again');
});

/** POST through node:http so the request can be chunked or ask for 100-continue. */
function rawPost(
  url: string,
  mode: 'chunked' | 'expect',
): Promise<{ status: number; text: string; continued: boolean }> {
  const { body, headers } = signed();
  return new Promise((resolve, reject) => {
    let continued = false;
    const req = httpRequest(
      `${url}${PATH}`,
      {
        method: 'POST',
        headers:
          mode === 'chunked'
            ? { ...headers, 'transfer-encoding': 'chunked' }
            : { ...headers, 'content-length': String(Buffer.byteLength(body)), expect: '100-continue' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, continued }));
      },
    );
    req.on('error', reject);
    if (mode === 'chunked') {
      const half = Math.floor(body.length / 2);
      req.write(body.slice(0, half));
      req.end(body.slice(half));
    } else {
      req.on('continue', () => {
        continued = true;
        req.end(body);
      });
    }
  });
}

test('chunked and Expect: 100-continue webhooks pass through the gateway to the sidecar', async (t) => {
  const gw = await startRouter(t, 'framing');
  await waitUntil(async () => (await readyz(gw.url)).status === 200, 'the gateway to be ready');
  const chunked = await rawPost(gw.url, 'chunked');
  assert.equal(chunked.status, 204, `${chunked.text}\n${gw.recentLog()}`);
  const expect = await rawPost(gw.url, 'expect');
  assert.equal(expect.status, 204, `${expect.text}\n${gw.recentLog()}`);
  assert.equal(expect.continued, true);
});

test('no sidecar listening (--no-sidecar): 503 with a JSON body that says so', async (t) => {
  const gw = await startRouter(t, 'no-sidecar', ['--no-sidecar']);
  const res = await fetch(`${gw.url}${PATH}`, { method: 'POST', ...signed() });
  assert.equal(res.status, 503);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  const body = (await res.json()) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'sidecar_unavailable');
  assert.match(body.error.message, /sidecar is unreachable; the webhook was not applied/);
  // Without supervision the gateway has no sidecar to wait for: readiness is its own.
  const ready = await readyz(gw.url);
  assert.equal(ready.status, 200);
  assert.equal(ready.body.sidecar, undefined);
});

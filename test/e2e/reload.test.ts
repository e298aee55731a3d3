// Hot reload under load: a bounded client loop keeps requests in flight while the configuration is
// reloaded several times, once with a broken provider file. No request fails, the broken file is refused
// with its errors logged and the running configuration kept, a stream in flight across the reloads
// completes on the configuration it started with, and every request's usage event reaches the outbox
// (the outbox writer is shared by the old and new configurations).

import assert from 'node:assert/strict';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { ACCESS_KEY, type GatewayFiles, type LogLine, writeGatewayFiles } from '../deploy/support.ts';
import { type HeldStreamUpstream, startHeldStreamUpstream } from '../support/held-stream.ts';
import { simProvider } from '../support/sim-providers.ts';
import { outboxEventIds } from '../support/usage-events.ts';

const V1 = simProvider('pacer');
const STRIP = '    response { sse_parse openai_usage_strip; }\n';
/** v2 tags upstream requests differently and no longer strips the usage-only chunk from streams. */
function pacerVersion(tag: string): string {
  assert.ok(V1.includes(STRIP) && V1.includes('"x-test-provider" "pacer"'));
  return V1.replace(STRIP, '').replace('"x-test-provider" "pacer"', `"x-test-provider" "${tag}"`);
}
/** The provider of the long stream: the held upstream, changed at the first reload as pacer is. */
const HOLDER_V1 = simProvider('holder');
const HOLDER_V2 = HOLDER_V1.replace(STRIP, '');
/** Deltas the long stream sends before it is held, and after it is released. */
const HELD_BEFORE = 4;
const HELD_AFTER = 8;
const BROKEN =
  'syntax "next-router/0.1";\nprovider "pacer" {\n  defaults { upstream_config { base_url = ; }\n';

let sim: UpstreamSim;
let holder: HeldStreamUpstream;
let files: GatewayFiles;
let gw: RunningGateway;
const logs: LogLine[] = [];

before(async () => {
  sim = await startUpstreamSim({ maxRecorded: 2000 });
  holder = await startHeldStreamUpstream(HELD_BEFORE, HELD_AFTER);
  files = await writeGatewayFiles({
    simUrl: sim.url,
    providers: { pacer: V1, holder: HOLDER_V1 },
    extraYaml: '',
  });
  files.env.ROUTER_PROVIDER_HOLDER_BASE_URL = holder.url;
  await writeFile(
    files.configFile,
    `${await readFile(files.configFile, 'utf8')}
billing:
  enabled: true
  base_url: http://127.0.0.1:1
  project_id: p
  api_key: billing-key
  extractor_rule_set_id: r
  outbox_dir: ${join(files.dir, 'outbox')}
`,
  );
  const logger = pino(
    { level: 'info' },
    {
      write(line: string) {
        logs.push(JSON.parse(line) as LogLine);
      },
    },
  );
  gw = await startGateway(files.configFile, { env: files.env, sidecar: false, logger });
});

after(async () => {
  await gw?.close();
  await sim?.close();
  await holder?.close();
  await files?.remove();
});

interface Outcome {
  id: string;
  status: number;
  ok: boolean;
  usageChunk: boolean;
  deltas: number;
}

async function call(id: string, stream: boolean, extra: Record<string, string> = {}): Promise<Outcome> {
  const res = await fetch(`${gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACCESS_KEY}`,
      'content-type': 'application/json',
      'x-router-request-id': id,
      ...(stream ? { 'x-router-provider': 'pacer', 'x-sim-chunks': '3', 'x-sim-chunk-delay-ms': '5' } : {}),
      ...extra,
    },
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      stream,
      messages: [{ role: 'user', content: `request ${id}` }],
    }),
  });
  const text = await res.text();
  if (!stream) {
    const body = JSON.parse(text) as { choices?: { message?: { content?: string } }[] };
    const ok = res.status === 200 && typeof body.choices?.[0]?.message?.content === 'string';
    return { id, status: res.status, ok, usageChunk: false, deltas: 0 };
  }
  const events = text
    .split('\n\n')
    .map((e) => e.replace(/^data: /, '').trim())
    .filter((e) => e !== '');
  let deltas = 0;
  let usageChunk = false;
  for (const e of events.slice(0, -1)) {
    const chunk = JSON.parse(e) as { choices?: { delta?: { content?: string } }[]; usage?: unknown };
    if (chunk.choices?.[0]?.delta?.content) deltas++;
    if (Array.isArray(chunk.choices) && chunk.choices.length === 0 && chunk.usage) usageChunk = true;
  }
  const ok = res.status === 200 && events.at(-1) === '[DONE]' && deltas > 0;
  return { id, status: res.status, ok, usageChunk, deltas };
}

test('reloads under load: no request fails, a broken file is refused, streams finish on their config', async () => {
  // A long stream started on v1, held open by its upstream across every reload.
  const longStream = call('long-stream', true, { 'x-router-provider': 'holder' });
  await holder.held(1);
  let longDone = false;
  void longStream.then(() => {
    longDone = true;
  });

  let completed = 0;
  const milestones: { at: number; resolve: () => void }[] = [];
  const reached = (n: number) =>
    new Promise<void>((resolve) => {
      if (completed >= n) resolve();
      else milestones.push({ at: n, resolve });
    });

  const WORKERS = 4;
  const PER_WORKER = 40;
  const outcomes: Outcome[] = [];
  const load = Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      for (let i = 0; i < PER_WORKER; i++) {
        const id = `load-${w}-${i}`;
        const outcome = await call(id, i % 3 === 0).catch(
          (err: unknown): Outcome => ({
            id: `${id}: ${String(err)}`,
            status: -1,
            ok: false,
            usageChunk: false,
            deltas: 0,
          }),
        );
        outcomes.push(outcome);
        completed++;
        for (const m of milestones.filter((m) => completed >= m.at)) {
          milestones.splice(milestones.indexOf(m), 1);
          m.resolve();
        }
      }
    }),
  );

  const providerFile = join(files.providersDir, 'pacer.conf');
  await reached(20);
  await writeFile(providerFile, pacerVersion('pacer-v2'));
  await writeFile(join(files.providersDir, 'holder.conf'), HOLDER_V2);
  assert.deepEqual(await gw.reload(), []);
  await reached(50);
  await writeFile(providerFile, BROKEN);
  const refused = await gw.reload();
  assert.ok(refused.length > 0, 'the broken provider file was accepted');
  assert.ok(
    refused.some((d) => d.includes('pacer.conf')),
    refused.join('\n'),
  );
  await reached(80);
  await writeFile(providerFile, pacerVersion('pacer-v3'));
  assert.deepEqual(await gw.reload(), []);
  await reached(110);
  assert.deepEqual(await gw.reload(), []);
  await load;
  assert.equal(longDone, false, 'the held stream ended before it was released');
  holder.release();

  const failed = outcomes.filter((o) => !o.ok);
  assert.deepEqual(failed, [], `${failed.length} requests failed across the reloads`);
  assert.equal(outcomes.length, WORKERS * PER_WORKER);

  // The refusal is logged with its diagnostics; the configuration before it stayed in place.
  const refusal = logs.filter((l) => l.msg === 'reload refused: configuration invalid');
  assert.ok(refusal.length > 0);
  assert.ok(refusal.some((l) => String(l.diagnostic).includes('pacer.conf')));
  assert.equal(logs.filter((l) => l.msg === 'configuration reloaded').length, 3);
  const tags = new Set(sim.requests.map((r) => r.headers['x-test-provider']).filter((t) => t !== undefined));
  assert.deepEqual([...tags].sort(), ['pacer', 'pacer-v2', 'pacer-v3']);

  // Streams started on v1 had their usage chunk stripped, later ones (v2, v3) pass it on.
  const streamed = outcomes.filter((o) => o.deltas > 0);
  assert.ok(streamed.some((o) => !o.usageChunk) && streamed.some((o) => o.usageChunk));

  // The stream in flight across all reloads completed on v1: all deltas, [DONE], no usage chunk.
  const long = await longStream;
  assert.deepEqual(
    { ok: long.ok, deltas: long.deltas, usageChunk: long.usageChunk },
    {
      ok: true,
      deltas: HELD_BEFORE + HELD_AFTER,
      usageChunk: false,
    },
  );

  // A stream started on the holder's v2 passes the usage chunk on: the long stream kept v1.
  const holderV2 = await call('holder-v2', true, { 'x-router-provider': 'holder' });
  assert.ok(holderV2.ok && holderV2.usageChunk);

  // After the load: the broken file is refused again and v3 still serves.
  await writeFile(providerFile, BROKEN);
  assert.ok((await gw.reload()).length > 0);
  const after = await call('after-broken', true);
  assert.ok(after.ok && after.usageChunk);
  assert.equal(sim.requests.at(-1)?.headers['x-test-provider'], 'pacer-v3');

  // Every request's usage event was written, whichever configuration served it.
  await gw.close();
  const outbox = join(files.dir, 'outbox');
  let text = '';
  for (const f of await readdir(outbox))
    if (f.endsWith('.jsonl')) text += await readFile(join(outbox, f), 'utf8');
  const ids = new Set(outboxEventIds(text));
  for (const o of outcomes) assert.ok(ids.has(o.id), `no usage event for ${o.id}`);
  assert.ok(ids.has('long-stream') && ids.has('after-broken'));
});

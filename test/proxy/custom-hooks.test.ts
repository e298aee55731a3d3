// Custom hook modules through a real gateway and the upstream simulator: a bare package name imports the
// package installed beside the configuration (docs/configuration.md `hooks[].module`, docs/dsl.md
// `hook`), an onRequest `{kind:'respond'}` answers the client without calling any upstream, and the
// authenticate stage runs before the body is parsed while onRequest sees it.

import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { type RunningGateway, startGateway } from '../../proxy/gateway.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { simProvider } from '../support/sim-providers.ts';
import { ACCESS_KEY, PRICING_FILE, postJson, simProviderEnv } from '../support/stack.ts';

// Plain JavaScript, as a published package would ship it. `answer` responds early when the model asks
// for it; `tag` writes its option into the upstream body so a test can see the rule hook ran.
const HOOK_PACKAGE = `
export function createHook(options) {
  if (options.role === 'tag') {
    return {
      name: 'test-tag',
      rewriteBody(ctx, req) {
        return { ...req, body: { ...req.body, hook_tag: options.tag } };
      },
    };
  }
  const bodyAtAuth = new WeakMap();
  return {
    name: 'test-answer',
    authenticate(ctx) {
      bodyAtAuth.set(ctx, { parsed: ctx.body !== undefined, model: ctx.model ?? null });
      return { kind: 'continue' };
    },
    onRequest(ctx) {
      if (ctx.model !== 'answered-by-hook') return { kind: 'continue' };
      return {
        kind: 'respond',
        status: 418,
        body: {
          answered: 'by hook',
          subject: ctx.principal?.subjectId ?? null,
          at_auth: bodyAtAuth.get(ctx),
          messages: ctx.body.messages.length,
        },
        headers: { 'x-test-hook': 'answer' },
      };
    },
  };
}
`;

const TAGGED_PROVIDER = simProvider('tagged').replace(
  '  defaults {',
  '  defaults {\n    hook "router-test-hooks" { role = "tag"; tag = "from-package"; }',
);

let sim: UpstreamSim;
let gateway: RunningGateway;
let dir: string;

before(async () => {
  sim = await startUpstreamSim();
  dir = await mkdtemp(join(tmpdir(), 'router-hooks-'));
  const pkg = join(dir, 'node_modules', 'router-test-hooks');
  await mkdir(pkg, { recursive: true });
  await writeFile(
    join(pkg, 'package.json'),
    JSON.stringify({ name: 'router-test-hooks', type: 'module', main: 'index.js' }),
  );
  await writeFile(join(pkg, 'index.js'), HOOK_PACKAGE);
  await mkdir(join(dir, 'providers'));
  await writeFile(join(dir, 'providers', 'tagged.conf'), TAGGED_PROVIDER);
  await writeFile(join(dir, 'models.yaml'), 'models:\n  tagged-model: { providers: [tagged] }\n');
  const configFile = join(dir, 'router.yaml');
  await writeFile(
    configFile,
    [
      'listen: 127.0.0.1:0',
      'providers_dir: ./providers',
      'models: ./models.yaml',
      `pricing: ${PRICING_FILE}`,
      'log: { level: silent }',
      'hooks:',
      '  - module: router-test-hooks',
    ].join('\n'),
  );
  // The gateway's own folder has no such package: only resolving from the configuration's folder finds it.
  assert.notEqual(process.cwd(), dir);
  gateway = await startGateway(configFile, {
    env: simProviderEnv(sim.url, ['tagged']),
    sidecar: false,
    logger: pino({ level: 'silent' }),
  });
});

after(async () => {
  await gateway?.close();
  await sim?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('custom hook modules', () => {
  test('onRequest {kind: respond} answers with its status, body and headers, no upstream call; authenticate ran before the body was parsed, onRequest sees it', async () => {
    const before = sim.requests.length;
    const res = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACCESS_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'answered-by-hook', messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(res.status, 418);
    assert.equal(res.headers.get('x-test-hook'), 'answer');
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(await res.json(), {
      answered: 'by hook',
      subject: 'client_a',
      at_auth: { parsed: false, model: null },
      messages: 1,
    });
    assert.equal(sim.requests.length, before);
  });

  test('a request the hook lets through reaches the upstream', async () => {
    const before = sim.requests.length;
    const res = await postJson(`${gateway.url}/v1/chat/completions`, {
      model: 'tagged-model',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 200);
    assert.equal(sim.requests.length, before + 1);
  });

  test('a provider file hook given as a bare package name is imported from that package', async () => {
    const res = await postJson(`${gateway.url}/v1/chat/completions`, {
      model: 'tagged-model',
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(res.status, 200);
    const up = sim.requests.at(-1);
    assert.equal(up?.headers['x-test-provider'], 'tagged');
    assert.equal((up?.json as { hook_tag?: string } | undefined)?.hook_tag, 'from-package');
  });
});

// Truncated and corrupted bodies on every model route (issue 40: a multipart body ending inside a file
// part ended the process, with no key needed). The gateway runs as a child process, so that its exit is
// seen; every shipped provider has a base URL and key (the simulator, which is told to fail nowhere), so
// no answer may be a 5xx. Without a valid key the answer is 401 whatever the body. The cases come from
// bench/lib/body-fuzz-cases.ts, which bench/fuzz.ts runs for longer with a report.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout } from 'node:timers/promises';
import {
  buildCase,
  describeCase,
  type FuzzGateway,
  familyErrorProblem,
  REPRO_BODY,
  ROUTES,
  runRecipes,
  sampleRecipes,
  sendCase,
  startFuzzGateway,
} from '../../bench/lib/body-fuzz-cases.ts';
import { startUpstreamSim, type UpstreamSim } from '../../sim/upstream/server.ts';
import { ACCESS_KEY, ROOT, simProviderEnv } from '../support/stack.ts';

const SEED = 40_001;
const CASES = 5_000;
const TIMEOUT_MS = 15_000;

let sim: UpstreamSim;
let gateway: FuzzGateway;
let dir: string;

before(async () => {
  // Without its key check: azure-openai sends `api-key` and ollama no key, which the simulator's OpenAI
  // dialect would refuse (a 502 of the provider's credentials, not of the client's input).
  sim = await startUpstreamSim({ record: false, requireAuth: false });
  dir = await mkdtemp(join(tmpdir(), 'router-body-fuzz-'));
  gateway = await startFuzzGateway(ROOT, dir, simProviderEnv(sim.url));
});
after(async () => {
  await gateway?.stop();
  await sim?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The gateway answers /healthz 200; if not, the failure carries its exit and the end of its stderr. */
async function assertAlive(): Promise<void> {
  const status = await fetch(`${gateway.url}/healthz`).then(
    async (res) => {
      await res.arrayBuffer();
      return res.status;
    },
    () => undefined,
  );
  // Only to name the failure: the exit may be reported just after the refused connection.
  if (status === undefined) await Promise.race([gateway.exited, setTimeout(5000)]);
  assert.equal(
    gateway.exit,
    undefined,
    `the gateway exited (${JSON.stringify(gateway.exit)}): ${gateway.stderr().slice(-3000)}`,
  );
  assert.equal(status, 200, '/healthz answers 200');
}

test("the issue's reproduction: a form ending inside its file part is 400 with a key, 401 without", async () => {
  for (const path of ['/v1/audio/transcriptions', '/v1/images/edits', '/v1/audio/translations']) {
    for (const keyed of [true, false]) {
      const route = ROUTES.findIndex((r) => r.path === path);
      const recipe = {
        route,
        auth: keyed ? 'bearer' : 'none',
        delivery: 'exact',
        mutation: 'repro',
        a: 0,
        b: 0,
        seed: 0,
      } as const;
      const c = buildCase(recipe, ACCESS_KEY);
      assert.deepEqual(c.body, REPRO_BODY);
      const o = await sendCase(gateway.port, c, TIMEOUT_MS);
      if (o.status === undefined) await assertAlive();
      assert.equal(o.status, keyed ? 400 : 401, `${path} ${keyed ? 'with' : 'without'} a key: ${o.body}`);
      assert.equal(familyErrorProblem('openai', o.status!, o.body), undefined);
      if (keyed) assert.match(o.body.toString(), /Malformed multipart\/form-data body/);
    }
  }
  await assertAlive();
});

test(`${CASES} generated cases on every model route: never a 5xx or an exit, 401 without a key`, async () => {
  const started = performance.now();
  const recipes = sampleRecipes(SEED, CASES);
  const results = await runRecipes(gateway.port, recipes, ACCESS_KEY, {
    concurrency: 6,
    timeoutMs: TIMEOUT_MS,
  });
  const seconds = (performance.now() - started) / 1000;
  const byStatus = new Map<string, number>();
  for (const r of results) {
    const key = String(r.outcome.status ?? 'closed');
    byStatus.set(key, (byStatus.get(key) ?? 0) + 1);
  }
  const routes = new Set(results.map((r) => r.case.route.name));
  console.log(
    `body fuzz: ${results.length} cases on ${routes.size} routes in ${seconds.toFixed(1)} s; statuses ${JSON.stringify(Object.fromEntries([...byStatus].sort()))}`,
  );
  assert.equal(results.length, CASES);
  assert.equal(routes.size, ROUTES.length, 'every route was driven');
  await assertAlive();
  const failures = results.filter((r) => r.problem !== undefined);
  const kinds = new Map<string, number>();
  for (const f of failures) {
    const kind = (f.problem ?? '').slice(0, 40);
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  assert.deepEqual(
    failures.slice(0, 10).map((f) => `${f.problem} <- ${describeCase(f.case)}`),
    [],
    `${failures.length} of ${results.length} cases failed (${JSON.stringify([...kinds])}); gateway errors: ${gateway.errorLogs().slice(0, 5).join('\n')}`,
  );
  assert.deepEqual(gateway.errorLogs(), [], 'the gateway logged no error');
});

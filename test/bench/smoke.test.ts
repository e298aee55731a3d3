// Keeps the benchmark harness working: a few-second smoke run of the chat scenario against the
// simulator directly and through the gateway, in child processes as `npm run bench` runs them. It
// checks that numbers came out, never how large they are (no timing assertions).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const RUNNER = fileURLToPath(new URL('../../bench/run.ts', import.meta.url));

interface Summary {
  count: number;
  p50: number;
  p99: number;
}

interface SmokeResults {
  smoke: boolean;
  machine: { cpus: number; node: string };
  chat: {
    throughput: Record<
      string,
      { requestsPerSec: number; total2xx: number; non2xx: number } | { error: string }
    >;
    latency: Record<string, { requests: number; errors: number; ms: Summary } | { error: string }>;
  };
}

test('bench --smoke --only chat produces throughput and latency numbers for direct and gateway', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'bench-smoke-test-'));
  const out = join(dir, 'results.json');
  try {
    await run(
      process.execPath,
      [RUNNER, '--smoke', '--only', 'chat', '--peers', 'direct,gateway', '--out', out],
      {
        timeout: 120_000,
      },
    );
    const results = JSON.parse(await readFile(out, 'utf8')) as SmokeResults;
    assert.equal(results.smoke, true);
    assert.ok(results.machine.cpus > 0);
    assert.match(results.machine.node, /^v\d+/);
    for (const peer of ['direct', 'gateway']) {
      const tp = results.chat.throughput[peer];
      assert.ok(tp !== undefined && !('error' in tp), `${peer} throughput: ${JSON.stringify(tp)}`);
      assert.ok(tp.total2xx > 0, `${peer} answered no request with 2xx`);
      assert.ok(Number.isFinite(tp.requestsPerSec) && tp.requestsPerSec > 0);
      const lat = results.chat.latency[peer];
      assert.ok(lat !== undefined && !('error' in lat), `${peer} latency: ${JSON.stringify(lat)}`);
      assert.equal(lat.errors, 0);
      assert.equal(lat.ms.count, lat.requests);
      assert.ok(Number.isFinite(lat.ms.p50) && lat.ms.p50 > 0);
      assert.ok(lat.ms.p99 >= lat.ms.p50);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

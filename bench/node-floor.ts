// `node bench/node-floor.ts`: what any Node.js proxy on this path pays, measured beside the gateway.
// A bare forwarder (bench/lib/bare-forwarder.ts: node:http in, undici out, the JSON reply buffered and
// sent back: no parsing, validation, routing, metering or metrics) runs in its own process in front of
// the upstream simulator, next to the gateway (file mode, billing off). In 5 interleaved rounds:
// latency at concurrency 1 (1,000 sequential requests per round, samples pooled) and throughput at
// concurrency 64 (3 s per round). The gap between the forwarder and the simulator is the floor under the
// gateway's added latency. `npm run bench` measures the same forwarder as its `node-floor` peer.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { latencySamples, throughput } from './lib/load.ts';
import {
  GATEWAY_V8_FLAGS,
  startGatewayProcess,
  startNodeFloor,
  startUpstreamSimProcess,
  type Workspace,
} from './lib/peers.ts';
import { chatTarget } from './lib/requests.ts';
import { summarize } from './lib/stats.ts';

const REPO = fileURLToPath(new URL('..', import.meta.url));

async function main(): Promise<void> {
  const tmp = await mkdtemp(join(tmpdir(), 'llm-router-floor-'));
  const ws: Workspace = {
    repo: REPO,
    tmp,
    gatewayNodeFlags: () => [...GATEWAY_V8_FLAGS],
    sidecarNodeFlags: () => [],
  };
  const up = await startUpstreamSimProcess(ws);
  const gw = await startGatewayProcess(ws, up.url, { id: 'gateway' });
  const floor = await startNodeFloor(ws, up.url);
  try {
    const direct = chatTarget({ id: 'direct', kind: 'direct', origin: up.url, service: up.service }, up.url);
    const targets = [
      ['upstream simulator (direct)', direct],
      ['bare Node forwarder', { ...direct, origin: floor.origin }],
      ['gateway, billing off', chatTarget(gw, up.url)],
    ] as const;
    const samples = new Map<string, Float64Array[]>();
    const rates = new Map<string, number[]>();
    for (let round = 0; round < 5; round++) {
      for (const [name, target] of targets) {
        const { samples: s } = await latencySamples(target, 1000, 100);
        samples.set(name, [...(samples.get(name) ?? []), s]);
        const r = await throughput(target, 64, 3);
        rates.set(name, [...(rates.get(name) ?? []), r.requestsPerSec]);
      }
    }
    const base = summarize(Float64Array.from(samples.get(targets[0][0])?.flatMap((a) => [...a]) ?? [])).p50;
    for (const [name] of targets) {
      const s = summarize(Float64Array.from(samples.get(name)?.flatMap((a) => [...a]) ?? []));
      const r = [...(rates.get(name) ?? [])].sort((a, b) => a - b);
      console.log(
        `${name.padEnd(30)} c=1 p50 ${s.p50.toFixed(3)} ms (added ${(s.p50 - base).toFixed(3)}), p99 ${s.p99.toFixed(3)} ms; c=64 median ${Math.round(r[2] ?? Number.NaN)} req/s`,
      );
    }
  } finally {
    await floor.service.stop();
    await gw.service.stop();
    await up.service.stop();
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();

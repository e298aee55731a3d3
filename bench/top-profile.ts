// `node bench/top-profile.ts [file.cpuprofile | folder] [--top 10]`: the functions with the most self
// time in a V8 CPU profile (as written by `npm run bench -- --profile`). Given a folder, it reads the
// newest gateway profile in it.

import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface SelfTime {
  name: string;
  location: string;
  selfMs: number;
  /** Share of the non-idle samples. */
  percent: number;
}

/** Self time per function (summed over every node of the same function and location). */
export function topSelfTime(profile: CpuProfile, top = 10, root = process.cwd()): SelfTime[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  // timeDeltas[i] is the time before sample i; the time spent in sample i is the next delta.
  for (let i = 0; i < samples.length; i++) {
    const dt = deltas[i + 1] ?? 0;
    const id = samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
  }
  const totals = new Map<string, SelfTime>();
  let busyUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (node === undefined) continue;
    const { functionName, url, lineNumber, columnNumber } = node.callFrame;
    const name = functionName === '' ? '(anonymous)' : functionName;
    if (name !== '(idle)' && name !== '(program)') busyUs += us;
    const file = url.startsWith('file://') ? relative(root, new URL(url).pathname) : url;
    const location = file === '' ? '' : `${file}:${lineNumber + 1}:${columnNumber + 1}`;
    const key = `${name} ${location}`;
    const entry = totals.get(key) ?? { name, location, selfMs: 0, percent: 0 };
    entry.selfMs += us / 1000;
    totals.set(key, entry);
  }
  return [...totals.values()]
    .filter((t) => t.name !== '(idle)' && t.name !== '(program)')
    .map((t) => ({
      ...t,
      selfMs: Math.round(t.selfMs * 10) / 10,
      percent: Math.round(((t.selfMs * 1000) / busyUs) * 1000) / 10,
    }))
    .sort((a, b) => b.selfMs - a.selfMs)
    .slice(0, top);
}

async function newestProfile(dir: string): Promise<string> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile'));
  const preferred = files.filter((f) => f.startsWith('gateway-2'));
  const pool = preferred.length > 0 ? preferred : files;
  if (pool.length === 0) throw new Error(`no .cpuprofile in ${dir}`);
  const withTimes = await Promise.all(pool.map(async (f) => ({ f, t: (await stat(join(dir, f))).mtimeMs })));
  withTimes.sort((a, b) => b.t - a.t);
  return join(dir, withTimes[0]!.f);
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    options: { top: { type: 'string', default: '10' } },
    allowPositionals: true,
  });
  let file = positionals[0] ?? 'bench/results/prof';
  if ((await stat(file)).isDirectory()) file = await newestProfile(file);
  const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const rows = topSelfTime(profile, Number(values.top));
  console.log(`${file}: ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s profiled`);
  console.log('self ms   busy %  function  location');
  for (const r of rows) {
    console.log(
      `${r.selfMs.toFixed(1).padStart(8)}  ${r.percent.toFixed(1).padStart(6)}  ${r.name}  ${r.location}`,
    );
  }
}

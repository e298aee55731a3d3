// What the numbers were measured on.

import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg, release, totalmem } from 'node:os';
import { findNginx, nginxVersion } from './peers.ts';

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  kernel: string;
  node: string;
  nginx: string;
  /** 1-minute load average when the run started: other work on the machine skews the numbers. */
  loadAvgStart: number;
  loadAvgEnd?: number;
}

export async function machineInfo(): Promise<MachineInfo> {
  let cpuModel = 'unknown';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m) cpuModel = m[1]!.trim();
  } catch {
    // not Linux
  }
  const bin = findNginx();
  let nginx = 'not installed';
  if (bin !== undefined) nginx = await nginxVersion(bin).catch((err: unknown) => `unknown (${String(err)})`);
  return {
    cpus: availableParallelism(),
    cpuModel,
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    kernel: release(),
    node: process.version,
    nginx,
    loadAvgStart: loadAverage(),
  };
}

export function loadAverage(): number {
  // loadavg() always has the 1, 5 and 15 minute figures.
  return Math.round(loadavg()[0]! * 100) / 100;
}

// Test support: the environment a gateway needs to reach the upstream simulator's Bedrock and Vertex
// routes (the simulator's service account written to a file, the cloud base URLs at the simulator).

import { join } from 'node:path';
import type { UpstreamSim } from '../../sim/upstream/server.ts';

export const SIM_PROJECT = 'sim-project';
export const SIM_LOCATION = 'us-east5';

export async function cloudSimEnv(sim: UpstreamSim, dir: string): Promise<Record<string, string>> {
  const file = join(dir, 'vertex-sa.json');
  await sim.auth.writeServiceAccountFile(file, { project: SIM_PROJECT });
  return {
    GOOGLE_APPLICATION_CREDENTIALS: file,
    ROUTER_PROVIDER_VERTEX_LOCATION: SIM_LOCATION,
    ROUTER_PROVIDER_VERTEX_BASE_URL: sim.url,
    ROUTER_PROVIDER_BEDROCK_BASE_URL: sim.url,
    ROUTER_PROVIDER_BEDROCK_CONVERSE_BASE_URL: sim.url,
  };
}

// CLI: `npm run upstream-sim -- --port 8787 --host 127.0.0.1 [--delay 0] [--no-record] [--no-auth]`.
// Prints the simulator's URL and runs until SIGINT/SIGTERM (common/signals.ts).

import { parseArgs } from 'node:util';
import { handleSignals } from '../../common/signals.ts';
import { startUpstreamSim } from './server.ts';
import { loadVocabulary } from './token-count.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: process.env.UPSTREAM_SIM_PORT ?? '8787' },
    host: { type: 'string', default: process.env.UPSTREAM_SIM_HOST ?? '127.0.0.1' },
    delay: { type: 'string', default: '0' },
    'no-record': { type: 'boolean', default: false },
    'no-auth': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help) {
  console.log(
    'Usage: upstream-sim [--port 8787] [--host 127.0.0.1] [--delay <ms between SSE events>] [--no-record] [--no-auth]',
  );
  process.exit(0);
}

loadVocabulary();
const sim = await startUpstreamSim({
  port: Number(values.port),
  host: values.host,
  defaultChunkDelayMs: Number(values.delay),
  record: !values['no-record'],
  requireAuth: !values['no-auth'],
});
console.log(`upstream simulator listening on ${sim.url}`);

handleSignals({ stop: () => sim.close() });

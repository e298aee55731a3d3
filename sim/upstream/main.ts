// CLI: `npm run upstream-sim -- --port 8787 --host 127.0.0.1 [--delay 0] [--no-record] [--no-auth]`
// plus the cloud credentials it checks (README "Cloud credentials"). Prints the simulator's URL and runs
// until SIGINT/SIGTERM (common/signals.ts).

import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { handleSignals } from '../../common/signals.ts';
import { startUpstreamSim } from './server.ts';
import { loadVocabulary } from './token-count.ts';

const env = process.env;
const { values } = parseArgs({
  options: {
    port: { type: 'string', default: env.UPSTREAM_SIM_PORT ?? '8787' },
    host: { type: 'string', default: env.UPSTREAM_SIM_HOST ?? '127.0.0.1' },
    delay: { type: 'string', default: '0' },
    'no-record': { type: 'boolean', default: false },
    'no-auth': { type: 'boolean', default: false },
    'aws-access-key-id': { type: 'string', default: env.UPSTREAM_SIM_AWS_ACCESS_KEY_ID },
    'aws-secret-access-key': { type: 'string', default: env.UPSTREAM_SIM_AWS_SECRET_ACCESS_KEY },
    'aws-session-token': { type: 'string', default: env.UPSTREAM_SIM_AWS_SESSION_TOKEN },
    'aws-region': { type: 'string', default: env.UPSTREAM_SIM_AWS_REGION },
    'bedrock-api-key': { type: 'string', default: env.UPSTREAM_SIM_BEDROCK_API_KEY },
    'google-service-account': { type: 'string', default: env.UPSTREAM_SIM_GOOGLE_SERVICE_ACCOUNT },
    'entra-tenant-id': { type: 'string', default: env.UPSTREAM_SIM_ENTRA_TENANT_ID },
    'entra-client-id': { type: 'string', default: env.UPSTREAM_SIM_ENTRA_CLIENT_ID },
    'entra-client-secret': { type: 'string', default: env.UPSTREAM_SIM_ENTRA_CLIENT_SECRET },
    'token-lifetime': { type: 'string', default: env.UPSTREAM_SIM_TOKEN_LIFETIME_S },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (values.help) {
  console.log(`Usage: upstream-sim [--port 8787] [--host 127.0.0.1] [--delay <ms between SSE events>] [--no-record] [--no-auth]
  [--aws-access-key-id ID --aws-secret-access-key SECRET [--aws-session-token T] [--aws-region R]]
  [--bedrock-api-key KEY] [--google-service-account <key file: trusted if it exists, else written>]
  [--entra-tenant-id T --entra-client-id C --entra-client-secret S] [--token-lifetime <s>]`);
  process.exit(0);
}

const accessKeyId = values['aws-access-key-id'];
const secretAccessKey = values['aws-secret-access-key'];
if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
  console.error('upstream-sim: --aws-access-key-id and --aws-secret-access-key go together');
  process.exit(2);
}
const tenantId = values['entra-tenant-id'];
const clientId = values['entra-client-id'];
const clientSecret = values['entra-client-secret'];
const entraSet = [tenantId, clientId, clientSecret].filter((v) => v !== undefined).length;
if (entraSet !== 0 && entraSet !== 3) {
  console.error('upstream-sim: --entra-tenant-id, --entra-client-id and --entra-client-secret go together');
  process.exit(2);
}
const saFile = values['google-service-account'];
const existingKey =
  saFile !== undefined && existsSync(saFile) ? JSON.parse(readFileSync(saFile, 'utf8')) : undefined;

loadVocabulary();
const sim = await startUpstreamSim({
  port: Number(values.port),
  host: values.host,
  defaultChunkDelayMs: Number(values.delay),
  record: !values['no-record'],
  requireAuth: !values['no-auth'],
  aws:
    accessKeyId !== undefined && secretAccessKey !== undefined
      ? {
          accessKeyId,
          secretAccessKey,
          sessionToken: values['aws-session-token'],
          region: values['aws-region'],
        }
      : undefined,
  bedrockApiKey: values['bedrock-api-key'],
  entra:
    tenantId !== undefined && clientId !== undefined && clientSecret !== undefined
      ? { tenantId, clientId, clientSecret }
      : undefined,
  tokenLifetimeS: values['token-lifetime'] === undefined ? undefined : Number(values['token-lifetime']),
  serviceAccounts: existingKey === undefined ? undefined : [existingKey],
});
if (saFile !== undefined && existingKey === undefined) {
  await sim.auth.writeServiceAccountFile(saFile);
  console.log(`upstream simulator: wrote service-account key ${saFile} (token_uri ${sim.url}/token)`);
}
console.log(`upstream simulator listening on ${sim.url}`);

handleSignals({ stop: () => sim.close() });

// Cloud credentials in the keys file: aws, service_account_file (relative to the file) and entra, with
// or without an api_key beside them; diagnostics never quote a secret.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseKeysSource } from '../../config/keys.ts';

test('aws, service_account_file and entra are read per provider; a relative file is the keys file folder', () => {
  const { keys, diagnostics } = parseKeysSource(
    `providers:
  bedrock:
    aws: { access_key_id: AKID, secret_access_key: s3cr3t, session_token: tok }
  bedrock-eu:
    api_key: bedrock-api-key
    aws: { access_key_id: AKID2, secret_access_key: s3cr3t2 }
  vertex:
    service_account_file: secrets/sa.json
  azure-openai:
    api_key: azure-key
    entra: { tenant_id: t, client_id: c, client_secret: cs }
`,
    '/etc/router/keys.yaml',
  );
  assert.deepEqual(diagnostics, []);
  assert.deepEqual(keys.cloudCredentials?.get('bedrock'), {
    aws: { accessKeyId: 'AKID', secretAccessKey: 's3cr3t', sessionToken: 'tok' },
    serviceAccountFile: undefined,
    entra: undefined,
  });
  assert.equal(keys.cloudCredentials?.get('vertex')?.serviceAccountFile, '/etc/router/secrets/sa.json');
  assert.deepEqual(keys.cloudCredentials?.get('azure-openai')?.entra, {
    tenantId: 't',
    clientId: 'c',
    clientSecret: 'cs',
  });
  assert.deepEqual(keys.providerKeys.get('azure-openai'), [{ name: 'default', value: 'azure-key' }]);
  assert.deepEqual(keys.providerKeys.get('bedrock-eu'), [{ name: 'default', value: 'bedrock-api-key' }]);
  assert.equal(keys.providerKeys.has('bedrock'), false);
});

test('an entry with neither a key nor cloud credentials, or an incomplete group, is a diagnostic', () => {
  const empty = parseKeysSource('providers:\n  x: {}\n', '/k.yaml');
  assert.match(
    empty.diagnostics.map((d) => d.message).join('\n'),
    /needs "api_key" or "keys" \(or cloud credentials/,
  );
  const half = parseKeysSource(
    'providers:\n  x:\n    entra: { tenant_id: t, client_secret: very-secret }\n',
    '/k.yaml',
  );
  const text = half.diagnostics.map((d) => d.message).join('\n');
  assert.match(text, /client_id/);
  assert.equal(text.includes('very-secret'), false);
});

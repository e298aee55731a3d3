// Microsoft Entra ID (Azure OpenAI): a client-credentials grant for the Cognitive Services scope, with a
// client secret or, for workload identity (AKS), the federated token in AZURE_FEDERATED_TOKEN_FILE as
// the client assertion.

import { readFileSync } from 'node:fs';
import type { EntraCredentials } from '../../common/config-types.ts';
import { postTokenForm } from './token-endpoint.ts';
import { CredentialUnusable, type TokenFetch } from './types.ts';

const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** Workload identity: an application whose federated credential trusts the token in `tokenFile`. */
export interface EntraWorkloadIdentity {
  readonly tenantId: string;
  readonly clientId: string;
  readonly tokenFile: string;
}

export const ENTRA_SCOPE = 'https://cognitiveservices.azure.com/.default';
export const DEFAULT_AUTHORITY_HOST = 'https://login.microsoftonline.com';

/** The token endpoint of a tenant; `authorityHost` is AZURE_AUTHORITY_HOST (sovereign clouds, tests). */
export function entraTokenUrl(tenantId: string, authorityHost: string | undefined): string {
  const host = (
    authorityHost === undefined || authorityHost === '' ? DEFAULT_AUTHORITY_HOST : authorityHost
  ).replace(/\/+$/, '');
  return `${host}/${encodeURIComponent(tenantId)}/oauth2/v2.0/token`;
}

export function entraTokenFetch(creds: EntraCredentials, authorityHost: string | undefined): TokenFetch {
  const url = entraTokenUrl(creds.tenantId, authorityHost);
  return (timeoutMs) =>
    postTokenForm(
      url,
      {
        grant_type: 'client_credentials',
        client_id: creds.clientId,
        client_secret: creds.clientSecret,
        scope: ENTRA_SCOPE,
      },
      timeoutMs,
    );
}

export function entraWorkloadTokenFetch(
  w: EntraWorkloadIdentity,
  authorityHost: string | undefined,
): TokenFetch {
  const url = entraTokenUrl(w.tenantId, authorityHost);
  return async (timeoutMs) => {
    let assertion: string;
    try {
      // Read on every grant: the token in the file is rotated.
      assertion = readFileSync(w.tokenFile, 'utf8').trim();
    } catch (err) {
      throw new CredentialUnusable(
        `cannot read the federated token file ${w.tokenFile} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
    return postTokenForm(
      url,
      {
        grant_type: 'client_credentials',
        client_id: w.clientId,
        client_assertion_type: JWT_BEARER_ASSERTION,
        client_assertion: assertion,
        scope: ENTRA_SCOPE,
      },
      timeoutMs,
    );
  };
}

// Microsoft Entra ID (Azure OpenAI): a client-credentials grant for the Cognitive Services scope.

import type { EntraCredentials } from '../../common/config-types.ts';
import { postTokenForm } from './token-endpoint.ts';
import type { TokenFetch } from './types.ts';

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

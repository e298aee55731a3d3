// A real OAuth2 token endpoint for tests: answers form-encoded grants on any path with tokens it
// numbers (`tok-1`, `tok-2`, ...), or with the status a test sets; it records every grant and can check
// the tokens it issued.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Grant {
  readonly path: string;
  readonly form: URLSearchParams;
}

export interface TokenEndpoint {
  readonly url: string;
  readonly grants: Grant[];
  /** Status of the next answers (200 issues a token); a function decides per grant. */
  status: number | ((grant: Grant, index: number) => number);
  /** expires_in of issued tokens, in seconds. */
  expiresIn: number;
  /** Delay before answering, ms. */
  delayMs: number;
  /** Checks a grant before a token is issued; a string is the refusal's error code. */
  check: ((grant: Grant) => string | undefined) | undefined;
  /** Tokens issued and not yet expired. */
  isValid(token: string): boolean;
  close(): Promise<void>;
}

export async function startTokenEndpoint(): Promise<TokenEndpoint> {
  const issued = new Map<string, number>();
  let count = 0;
  const ep: Omit<TokenEndpoint, 'url' | 'close'> & { server?: Server } = {
    grants: [],
    status: 200,
    expiresIn: 3600,
    delayMs: 0,
    check: undefined,
    isValid: (token) => (issued.get(token) ?? 0) > Date.now(),
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const grant = {
        path: req.url ?? '',
        form: new URLSearchParams(Buffer.concat(chunks).toString('utf8')),
      };
      const index = ep.grants.push(grant) - 1;
      setTimeout(() => {
        const status = typeof ep.status === 'function' ? ep.status(grant, index) : ep.status;
        const refusal = status === 200 ? ep.check?.(grant) : undefined;
        res.setHeader('content-type', 'application/json');
        if (status !== 200 || refusal !== undefined) {
          res.statusCode = refusal !== undefined ? 400 : status;
          res.end(
            JSON.stringify({ error: refusal ?? 'invalid_client', error_description: 'refused in a test' }),
          );
          return;
        }
        const token = `tok-${++count}`;
        issued.set(token, Date.now() + ep.expiresIn * 1000);
        res.end(JSON.stringify({ token_type: 'Bearer', access_token: token, expires_in: ep.expiresIn }));
      }, ep.delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(ep, {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  }) as TokenEndpoint;
}

// The URLs of store.addr: their user name and password are percent-encoded, so a literal "%" is written
// %25. The configuration checks and the Redis client read them here alike, so an address `router -t`
// accepts never fails when the client starts. Messages never include a credential.

/** One address of store.addr as a URL; undefined when it is not one. */
export function parseStoreUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/** A percent-decoded user name or password of a URL; undefined when its encoding is malformed. */
export function decodeUserinfo(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/** Why a user name or password of store.addr cannot be used, and the fix. */
export function malformedUserinfo(part: 'username' | 'password'): string {
  const name = part === 'username' ? 'user name' : 'password';
  return `the ${name} in store.addr is not valid percent-encoding: write a literal "%" as %25 (or set store.${part} instead)`;
}

/**
 * The credentials store.addr gives the client: the URL's parts not overridden by store.username and
 * store.password. Each undefined when absent; a part whose encoding is malformed is named in `malformed`.
 */
export function storeUrlCredentials(
  url: URL,
  overrides: { readonly username?: string | undefined; readonly password?: string | undefined },
): { username?: string; password?: string; malformed: ('username' | 'password')[] } {
  const out: { username?: string; password?: string; malformed: ('username' | 'password')[] } = {
    malformed: [],
  };
  for (const part of ['username', 'password'] as const) {
    if (overrides[part] !== undefined || url[part] === '') continue;
    const decoded = decodeUserinfo(url[part]);
    if (decoded === undefined) out.malformed.push(part);
    else out[part] = decoded;
  }
  return out;
}

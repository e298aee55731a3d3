// A trusted source of request ids as configured (request_id.trusted_sources): an address or a subnet.
// The configuration checks it when it loads; the gateway compiles it into its request-id policy.

import { isIP } from 'node:net';

/** `10.0.0.0/8`, `::1`, `192.168.1.7` -> a subnet; undefined when the text is neither. */
export function parseSource(
  text: string,
): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const slash = text.indexOf('/');
  const address = slash === -1 ? text : text.slice(0, slash);
  const version = isIP(address);
  if (version === 0) return undefined;
  const max = version === 4 ? 32 : 128;
  let prefix = max;
  if (slash !== -1) {
    const digits = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(digits)) return undefined;
    prefix = Number(digits);
    if (prefix > max) return undefined;
  }
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

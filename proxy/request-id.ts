// Which id a request is billed under. The usage event's idempotency key is `router:<id>`, so an id a
// caller may choose could make a request free (the billing service drops a repeated key as a
// duplicate). The gateway therefore makes its own id for every request and keeps a caller's
// `X-Router-Request-Id` as a correlation id, unless the request comes from a configured trusted source
// (an ingress that generates unique ids): docs/billing.md "Request ids".

import { randomFillSync } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { parseSource } from '../config/source-address.ts';

const ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

export interface RequestIds {
  /** The billing id: `external_event_id`, `router:<id>`, echoed as x-router-request-id. */
  readonly id: string;
  /** The caller's own id, when it gave a well-formed one that is not the billing id. */
  readonly correlationId: string | undefined;
}

export type RequestIdPolicy = (req: IncomingMessage) => RequestIds;

const policies = new WeakMap<readonly string[], RequestIdPolicy>();

/** The policy for a list of trusted sources (compiled once per configuration). */
export function requestIdPolicy(trustedSources: readonly string[]): RequestIdPolicy {
  let policy = policies.get(trustedSources);
  if (policy !== undefined) return policy;
  const trusted = new BlockList();
  for (const text of trustedSources) {
    const source = parseSource(text);
    if (source !== undefined) trusted.addSubnet(source.address, source.prefix, source.family);
  }
  const anyTrusted = trustedSources.length > 0;
  policy = (req) => {
    const given = wellFormed(req.headers['x-router-request-id']);
    if (given !== undefined && anyTrusted && isTrusted(trusted, req.socket.remoteAddress)) {
      return { id: given, correlationId: wellFormed(req.headers['x-router-correlation-id']) };
    }
    return { id: newRequestId(), correlationId: given };
  };
  policies.set(trustedSources, policy);
  return policy;
}

/** Random bytes for request ids, drawn from the CSPRNG for 256 ids at a time. */
const ID_POOL = Buffer.allocUnsafe(16 * 256);
let idPoolAt = ID_POOL.length;
const ID_TEXT = Buffer.allocUnsafe(36);
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

/**
 * A random (version 4) UUID as one flat string. `randomUUID()` returns a string concatenated from its
 * bytes' hex pairs, a tree that the header write, the usage event and the span each walked again.
 */
export function newRequestId(): string {
  if (idPoolAt === ID_POOL.length) {
    randomFillSync(ID_POOL);
    idPoolAt = 0;
  }
  let o = 0;
  for (let i = 0; i < 16; i++) {
    let v = ID_POOL[idPoolAt + i]!;
    if (i === 6) v = (v & 0x0f) | 0x40;
    else if (i === 8) v = (v & 0x3f) | 0x80;
    ID_TEXT[o++] = HEX_DIGITS[v >>> 4]!;
    ID_TEXT[o++] = HEX_DIGITS[v & 0x0f]!;
    if (i === 3 || i === 5 || i === 7 || i === 9) ID_TEXT[o++] = 0x2d;
  }
  idPoolAt += 16;
  return ID_TEXT.toString('latin1', 0, 36);
}

function wellFormed(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' && ID_RE.test(value) ? value : undefined;
}

function isTrusted(list: BlockList, address: string | undefined): boolean {
  if (address === undefined) return false;
  // An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
  if (address.startsWith('::ffff:') && isIP(address.slice(7)) === 4)
    return list.check(address.slice(7), 'ipv4');
  return list.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');
}

// "host:port" strings of the configuration (`listen`, `billing.listen`, ROUTER_LISTEN).

import type { ListenAddress } from '../common/config-types.ts';

const LISTEN = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]*)):([0-9]{1,5})$/;

/**
 * Parses `host:port`, `[v6]:port` or `:port` (all interfaces). Port 0 asks the OS for a free port.
 * Returns undefined for anything else, including ports above 65535.
 */
export function parseListenAddress(text: string): ListenAddress | undefined {
  const match = LISTEN.exec(text);
  if (match === null) return undefined;
  const port = Number(match[3]);
  if (port > 65535) return undefined;
  const host = match[1] ?? (match[2] || '0.0.0.0');
  return { host, port };
}

export function formatListenAddress(address: ListenAddress): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}

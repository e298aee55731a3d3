// The one logger setup of both processes, the gateway (`router`) and the billing sidecar
// (`router-billing`): pino JSON lines on stdout with every credential path redacted.

import { type DestinationStream, type Logger, pino } from 'pino';
import { KEY_HEADERS } from '../hooks/families/index.ts';

/** Keys whose values never reach a log line. */
export const REDACT = {
  paths: [
    'req.headers.authorization',
    ...KEY_HEADERS.map((name) => `req.headers["${name}"]`),
    'headers.authorization',
    '*.api_key',
    '*.apiKey',
    '*.password',
    '*.secret',
    '*.webhookSecret',
  ],
  censor: '[redacted]',
};

/** A process logger (`destination`: stdout unless given, for tests). */
export function createLogger(name: string, level: string, destination?: DestinationStream): Logger {
  const options = { name, level, redact: REDACT };
  return destination === undefined ? pino(options) : pino(options, destination);
}

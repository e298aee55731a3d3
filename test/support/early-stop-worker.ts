// A node:cluster worker for test/proxy/workers/worker-link.test.ts: it connects to its primary, and
// registers its stop listener only when the primary says `register`, after the primary's stop was sent.

import { connectToPrimary } from '../../proxy/workers/worker-link.ts';

const link = connectToPrimary();
process.on('message', (m: { test?: string }) => {
  if (m.test !== 'register') return;
  // The link hands its messages on a turn later: the stop has been taken in by the time this runs.
  setImmediate(() => {
    link.onStop(() => process.send?.({ test: 'stopped' }));
    process.send?.({ test: 'registered' });
  });
});
process.send?.({ test: 'connected' });

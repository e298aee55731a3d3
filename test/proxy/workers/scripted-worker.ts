// A node:cluster worker for test/proxy/workers/primary.test.ts that plays a gateway worker: it reports
// listening at once, or exits 1 before that as its environment says. SCRIPTED_FAIL_FIRST lists the
// worker ids (or `*`) whose first start fails; SCRIPTED_FAIL_LATER=1 fails every start after a worker
// id's first. A marker file per worker id in SCRIPTED_DIR says that id has started before.

import { openSync } from 'node:fs';
import { join } from 'node:path';
import { connectToPrimary } from '../../../proxy/workers/worker-link.ts';

const id = process.env.ROUTER_WORKER_ID ?? '?';
const link = connectToPrimary();
let first = true;
try {
  openSync(join(process.env.SCRIPTED_DIR ?? '.', `started-${id}`), 'wx');
} catch {
  first = false;
}
const failFirst = (process.env.SCRIPTED_FAIL_FIRST ?? '').split(',');
const fails = first
  ? failFirst.includes(id) || failFirst.includes('*')
  : process.env.SCRIPTED_FAIL_LATER === '1';
if (fails) process.exit(1);
link.onStop(() => process.exit(0));
link.listening(`http://scripted-worker-${id}`);

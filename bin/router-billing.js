#!/usr/bin/env -S node --max-semi-space-size=8
// The billing sidecar. The code is TypeScript run natively, so this must run under the project's Node 24
// (package.json engines): `npx router-billing -c config.yaml` or an npm script, both of which put
// node_modules/.bin (with the pinned `node` package) first on PATH. The machine's own older node cannot
// load .ts files: it gets one line saying so (bin/require-node.js) before anything .ts is loaded.
import { requireNode24 } from './require-node.js';

requireNode24('router-billing');
const { runSidecarMain } = await import('./sidecar-main.ts');
const code = await runSidecarMain(process.argv.slice(2));
if (code >= 0) process.exitCode = code;

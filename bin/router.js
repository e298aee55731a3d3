#!/usr/bin/env -S node --max-semi-space-size=16
// The gateway. The code is TypeScript run natively, so this runs under the project's Node 24: `npx router`
// or an npm script put node_modules/.bin (with the pinned `node` package) first on PATH. An older node
// gets one line saying so (bin/require-node.js) before anything .ts is loaded.
import { requireNode24 } from './require-node.js';

requireNode24('router', ' or `npm start`');
const { main } = await import('../proxy/cli.ts');
const code = await main(process.argv.slice(2));
if (code >= 0) process.exitCode = code;

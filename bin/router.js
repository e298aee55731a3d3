#!/usr/bin/env -S node --max-semi-space-size=16
// The gateway. The code is TypeScript run natively, so this runs under the project's Node 24: `npx router`
// or an npm script put node_modules/.bin (with the pinned `node` package) first on PATH.
import { main } from '../proxy/cli.ts';

const code = await main(process.argv.slice(2));
if (code >= 0) process.exitCode = code;

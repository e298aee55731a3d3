#!/usr/bin/env node
// Administration commands (access keys). The code is TypeScript run natively, so this runs under the
// project's Node 24: `npx router-admin ...` or an npm script put node_modules/.bin first on PATH. An older
// node gets one line saying so (bin/require-node.js) before anything .ts is loaded.
import { requireNode24 } from './require-node.js';

requireNode24('router-admin');
const { runAdmin } = await import('../admin/cli.ts');
process.exitCode = await runAdmin(process.argv.slice(2));

#!/usr/bin/env node
// Administration commands (access keys). The code is TypeScript run natively, so this runs under the
// project's Node 24: `npx router-admin ...` or an npm script put node_modules/.bin first on PATH.
import { runAdmin } from '../admin/cli.ts';

process.exitCode = await runAdmin(process.argv.slice(2));

// Custom hook modules (docs/hooks.md): resolving a module name the way Node would from the file that
// names it, and calling its createHook(options).

import { createRequire } from 'node:module';
import { dirname, isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { errorText } from '../common/errors.ts';
import type { Hook, HookModule, JsonValue } from '../common/types.ts';

/**
 * A hook module's URL: a file path as it is, a bare package name resolved the way Node resolves it
 * from `fromFile`'s folder (the configuration or provider file naming it), not from the gateway's.
 */
export function hookModuleUrl(module: string, fromFile: string): string {
  if (isAbsolute(module)) return pathToFileURL(module).href;
  try {
    return pathToFileURL(createRequire(resolve(fromFile)).resolve(module)).href;
  } catch (err) {
    // Node's message goes on with a require stack; a diagnostic is one line.
    throw new Error(`${errorText(err)} (looked up from ${dirname(resolve(fromFile))})`);
  }
}

/** Load a custom hook module: `createHook(options)` (named or default export). */
export async function loadHookModule(
  module: string,
  options: Readonly<Record<string, JsonValue>>,
  fromFile: string,
): Promise<Hook> {
  const mod = (await import(hookModuleUrl(module, fromFile))) as Partial<HookModule> & {
    default?: Partial<HookModule>;
  };
  const create = mod.createHook ?? mod.default?.createHook;
  if (typeof create !== 'function') throw new Error(`${module}: exports no createHook(options) function`);
  const hook = await create(options);
  if (hook === null || typeof hook !== 'object' || typeof hook.name !== 'string') {
    throw new Error(`${module}: createHook() must return an object with a name`);
  }
  return hook;
}

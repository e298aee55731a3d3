// Custom hook modules (docs/hooks.md): importing one from where the file that names it says
// (common/hook-module-path.ts) and calling its createHook(options).

import { hookModuleUrl } from '../common/hook-module-path.ts';
import type { Hook, HookModule, JsonValue } from '../common/types.ts';

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

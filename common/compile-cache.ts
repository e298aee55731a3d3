// Imported by the gateway's entry right after early-async-context.ts, before any module of its own: V8
// keeps the compiled code of the modules it loads on disk (Node's module compile cache, in the system
// temporary folder), so a restarted process or a new worker skips most of the parsing, the tokenizer's
// large encoding tables above all, which each process loads before it listens. Where that folder cannot
// be written the cache is simply off; NODE_DISABLE_COMPILE_CACHE=1 turns it off.

import { enableCompileCache } from 'node:module';

enableCompileCache();

// Imported first by the gateway's and the sidecar's entry modules. Node switches its async-context
// frames on (it swaps the prototype of an internal class) at the first read of AsyncLocalStorage or the
// first timer it cleans. Ticks that run before the swap, such as a Redis connection's handshake, leave
// V8's optimized tick loop with both shapes of that class, and it then looks the class's methods up
// generically on every tick for the life of the process. Reading AsyncLocalStorage here makes the swap
// come before any connection is opened.

import { AsyncLocalStorage } from 'node:async_hooks';

void AsyncLocalStorage;

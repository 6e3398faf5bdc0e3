/**
 * The wasmloop SDK for JavaScript: write a reconcile function, not a controller.
 *
 * A plugin is a module whose default export is `{ manifest(), reconcile(request), map?, mapChange? }`;
 * `wasmloop-js build DIR -o plugin.wasm` makes it a component (componentize-js, pinned), and
 * `@wasmloop/sdk/testing` runs it under `node --test` as the host would.
 */

export * as cache from './cache.js';
export * as kinds from './kinds.js';
export * as log from './log.js';
export { Kind } from './kinds.js';
export { Apply, Delete, Event, ObjectRef, Patch, Prune, RequeueAfter, Status, apply, event, patch, prune, ref, remove, remove as delete, requeueAfter, status } from './actions.js';
export { CacheError, PermanentError, ReconcileError, TransientError } from './errors.js';
export { Grant, Index, Manifest, Watch, grant, index, manifest, watch } from './manifest.js';
export { Related, Request, Trigger } from './request.js';

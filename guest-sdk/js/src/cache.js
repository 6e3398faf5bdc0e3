/**
 * Read-only look-ups in the host's informer cache: no API call, only declared kinds. Objects
 * come back as plain objects. A refused look-up throws `CacheError`.
 */

import { host } from './host.js';

export const PAGE_SIZE = 500;

/** The object of `kind` named `name` (in `namespace`), or `null`. */
export function get(kind, name, namespace = undefined) {
  // null is "none", as the component's glue reads it.
  return host().get(kind, namespace ?? undefined, name);
}

/** Objects of `kind` one page at a time, in (namespace, name) order. `limit` 0: the host's page size. */
export function* pages(kind, { namespace = undefined, selector = undefined, limit = 0 } = {}) {
  if (!Number.isInteger(limit) || limit < 0 || limit >= 2 ** 32) {
    throw new RangeError(`list limit ${limit}: give 0 (the host's page size) up to ${PAGE_SIZE}`);
  }
  let token;
  do {
    const [items, next] = host().page(kind, namespace ?? undefined, selector ?? undefined, limit, token);
    yield items;
    token = next;
  } while (token !== undefined && token !== null);
}

/** Every object of `kind` (in `namespace`, matching `selector`), all pages. */
export function list(kind, options = {}) {
  return [...pages(kind, options)].flat();
}

/**
 * The objects of `kind` the manifest's index `index` files under `key`, one page at a time, in
 * (namespace, name) order. A look-up costs what its answer holds, not what the kind holds. An
 * index the manifest does not declare throws `CacheError` (`unknown-index`).
 */
export function* indexPages(kind, index, key, { namespace = undefined, limit = 0 } = {}) {
  if (!Number.isInteger(limit) || limit < 0 || limit >= 2 ** 32) {
    throw new RangeError(`list limit ${limit}: give 0 (the host's page size) up to ${PAGE_SIZE}`);
  }
  let token;
  do {
    const [items, next] = host().indexPage(kind, index, key, namespace ?? undefined, limit, token);
    yield items;
    token = next;
  } while (token !== undefined && token !== null);
}

/**
 * Every object of `kind` the index `index` files under `key`, all pages.
 *
 * @example
 * // manifest: indexes: [index('configmap', kinds.Deployment, ['spec.template.spec.volumes[*].configMap.name'])]
 * cache.byIndex(kinds.Deployment, 'configmap', 'settings', { namespace: 'shop' });
 */
export function byIndex(kind, index, key, options = {}) {
  return [...indexPages(kind, index, key, options)].flat();
}

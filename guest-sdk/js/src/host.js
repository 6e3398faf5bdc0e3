// The one seam between the SDK and whoever plays the host: the component's imports when the
// plugin runs in wasmloop, a fake when it runs under the test harness. Not a public API.

const unset = () => {
  throw new Error('no wasmloop host: run the plugin through wasmloop (built with `wasmloop-js build`) or under the test harness (@wasmloop/sdk/testing)');
};

let current = { get: unset, page: unset, indexPage: unset, log: unset };

export function host() {
  return current;
}

/** Makes `next` the current host and returns the one it replaces. */
export function install(next) {
  const previous = current;
  current = next;
  return previous;
}

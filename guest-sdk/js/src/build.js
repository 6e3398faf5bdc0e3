#!/usr/bin/env node
// `wasmloop-js build DIR -o OUT`: a plugin directory (its `plugin.js`, whose default export is
// the reconciler) as a wasmloop component, through componentize-js at the pinned version.

import { copyFile, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const COMPONENTIZE_JS = '0.23.0';
const here = dirname(fileURLToPath(import.meta.url));
const WIT = resolve(here, '..', 'wit');
// Features the sandbox does not offer: a plugin reaches the world through the host only.
const DISABLED = ['random', 'stdio', 'clocks', 'http', 'fetch-event'];

function usage(why) {
  console.error(`${why}\nusage: wasmloop-js build DIR -o OUT.wasm`);
  process.exit(2);
}

async function componentizeAtPin() {
  let version;
  try {
    // Its exports hide package.json: walk up from its entry point.
    let at = dirname(fileURLToPath(import.meta.resolve('@bytecodealliance/componentize-js')));
    for (;;) {
      const found = JSON.parse(await readFile(join(at, 'package.json'), 'utf8').catch(() => 'null'));
      if (found?.name === '@bytecodealliance/componentize-js') {
        version = found.version;
        break;
      }
      if (dirname(at) === at) break;
      at = dirname(at);
    }
  } catch {
    version = undefined;
  }
  if (version !== COMPONENTIZE_JS) {
    console.error(
      `componentize-js ${version ?? 'is not installed'}${version ? ' is installed' : ''}; this SDK builds with ${COMPONENTIZE_JS}: run \`npm ci\` in ${resolve(here, '..')}`,
    );
    process.exit(1);
  }
  return (await import('@bytecodealliance/componentize-js')).componentize;
}

/** Builds the plugin in `dir` into the component `out`. */
export async function build(dir, out) {
  const plugin = resolve(dir, 'plugin.js');
  try {
    await readFile(plugin);
  } catch {
    usage(`${plugin} does not exist: a plugin directory holds plugin.js, whose default export is the reconciler`);
  }
  const componentize = await componentizeAtPin();
  const work = await mkdtemp(join(tmpdir(), 'wasmloop-js-'));
  const started = process.cwd();
  try {
    // One module, as componentize-js reads one tree: the plugin, its imports (the SDK by its
    // package name, or anything else from npm) and the glue, bundled by esbuild.
    const entry = `import reconciler from ${JSON.stringify(plugin)};\nimport { exportsFor } from ${JSON.stringify(join(here, 'guest.js'))};\nexport const { plugin, cacheOptions } = exportsFor(reconciler);\n`;
    const esbuild = await import('esbuild');
    await esbuild.build({
      stdin: { contents: entry, resolveDir: resolve(dir), sourcefile: 'entry.js' },
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      outfile: join(work, 'plugin.bundle.js'),
      external: ['wasmloop:plugin/*'],
      // The SDK resolves to this copy, so a plugin in this repository needs no install.
      alias: { '@wasmloop/sdk': join(here, 'index.js'), '@wasmloop/sdk/testing': join(here, 'testing.js') },
      logLevel: 'error',
    });
    // componentize-js reads what lies under its working directory: the bundle and the WIT.
    await mkdir(join(work, 'wit'));
    await copyFile(join(WIT, 'plugin.wit'), join(work, 'wit', 'plugin.wit'));
    process.chdir(work);
    const { component } = await componentize({ sourcePath: join(work, 'plugin.bundle.js'), witPath: join(work, 'wit'), worldName: 'reconciler', disableFeatures: DISABLED });
    process.chdir(started);
    const partial = `${resolve(started, out)}.partial`;
    await writeFile(partial, component);
    await rename(partial, resolve(started, out));
    return component.length;
  } finally {
    process.chdir(started);
    await rm(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args[0] !== 'build') usage('unknown command');
  const o = args.indexOf('-o');
  if (args.length !== 4 || o < 0) usage('give a plugin directory and -o OUT');
  const dir = args[o === 2 ? 1 : 3];
  const out = args[o + 1];
  const size = await build(dir, out);
  console.log(`wrote ${out} (${(size / 1e6).toFixed(1)} MB)`);
}

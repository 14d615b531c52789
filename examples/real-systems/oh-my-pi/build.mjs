#!/usr/bin/env node
// Bundles the job manager and `job` tool of an unpacked
// @oh-my-pi/pi-coding-agent package, unchanged, into one ES module the
// adapter loads. Nothing of the package is copied into this repository: the
// source is read from where you unpacked it.
//
//   node build.mjs --upstream DIR [--out DIR]
//
// DIR is the unpacked package (the `package/` folder `npm pack` leaves, or
// $OMP_PACKAGE_DIR). The output goes to ./dist (upstream.mjs, upstream.json).
//
// The two files import a logger, a prompt renderer, TUI helpers, a schema
// builder and a markdown prompt; those are replaced by small local
// stand-ins (stubs/), since none of them takes part in the lifecycle.
// Everything else (job-manager.ts, job.ts, the async index, support.ts,
// tool-errors.ts) is the package's own code.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const STUBS = path.join(HERE, 'stubs');

function usage(problem) {
  process.stderr.write(`build.mjs: ${problem}\nusage: node build.mjs --upstream DIR [--out DIR]\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const options = { upstream: process.env.OMP_PACKAGE_DIR || null, out: path.join(HERE, 'dist') };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--upstream' || arg === '--out') {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      options[arg.slice(2)] = path.resolve(argv[++i]);
    } else {
      usage(`unknown argument ${JSON.stringify(arg)}`);
    }
  }
  if (!options.upstream) usage('say where the unpacked package is (--upstream DIR or OMP_PACKAGE_DIR)');
  return options;
}

/** The files of one upstream layout the adapter needs, relative to the package. */
const LAYOUTS = [
  { manager: 'src/async/job-manager.ts', tool: 'src/tools/job.ts', wait: null, control: null },
  // 18.x: the `job` tool is gone; the agent waits with `wait` and cancels through job control
  { manager: 'src/async/job-manager.ts', tool: null, wait: 'src/tools/wait.ts', control: 'src/async/job-control.ts' },
  { manager: 'src/async/job-manager.ts', tool: null, wait: null, control: null },
];

function readPackage(dir) {
  const manifest = path.join(dir, 'package.json');
  if (!fs.existsSync(manifest)) usage(`${manifest} does not exist: is ${dir} the unpacked package?`);
  const pkg = JSON.parse(fs.readFileSync(manifest, 'utf8'));
  if (pkg.name !== '@oh-my-pi/pi-coding-agent') usage(`${manifest} is ${pkg.name}, not @oh-my-pi/pi-coding-agent`);
  const layout = LAYOUTS.find((l) =>
    [l.manager, l.tool, l.wait, l.control].every((f) => f === null || fs.existsSync(path.join(dir, f))),
  );
  if (!layout) usage(`${dir} has no src/async/job-manager.ts`);
  return { version: pkg.version, layout };
}

const STUBBED = {
  '@oh-my-pi/pi-utils': 'pi-utils.mjs',
  '@oh-my-pi/pi-tui': 'tui.mjs',
  '@sinclair/typebox': 'typebox.mjs',
};
// Relative imports of job.ts that only its TUI renderer uses.
const STUBBED_RELATIVE = { '../tui': 'tui.mjs', './render-utils': 'tui.mjs' };
// What 18.x's wait.ts and job-control.ts import beside the manager (stubs/coordination.mjs).
const STUBBED_COORDINATION = new Set([
  '@oh-my-pi/omptype',
  '@oh-my-pi/pi-agent-core',
  '../irc/bus',
  '../irc/messaging',
  '../launch/services',
  './settings',
  '../session/async-job-delivery',
  '../session/messages',
]);
const COORDINATION_IMPORTERS = [
  path.join('src', 'tools', 'wait.ts'),
  path.join('src', 'async', 'job-control.ts'),
  path.join('src', 'tools', 'tool-errors.ts'),
];

function standIns() {
  return {
    name: 'oh-my-pi-stand-ins',
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind === 'entry-point') return undefined;
        if (args.path in STUBBED) return { path: path.join(STUBS, STUBBED[args.path]) };
        const coordination = COORDINATION_IMPORTERS.some((f) => args.importer.endsWith(f));
        if (coordination && (STUBBED_COORDINATION.has(args.path) || args.path.startsWith('@oh-my-pi/pi-tui/'))) {
          return { path: path.join(STUBS, 'coordination.mjs') };
        }
        if (args.path.endsWith('.md')) return { path: args.path, namespace: 'prompt-text' };
        const fromTool = args.importer.endsWith(path.join('src', 'tools', 'job.ts'));
        if (fromTool && args.path in STUBBED_RELATIVE) return { path: path.join(STUBS, STUBBED_RELATIVE[args.path]) };
        if (args.path.startsWith('.')) return undefined; // the package's own code
        if (args.importer.startsWith(STUBS)) return undefined;
        return { errors: [{ text: `${args.importer}: imports ${args.path}, which has no stand-in (see stubs/)` }] };
      });
      build.onLoad({ filter: /.*/, namespace: 'prompt-text' }, () => ({ contents: 'export default "";', loader: 'js' }));
    },
  };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const { version, layout } = readPackage(options.upstream);
  const exports = [`export { AsyncJobManager } from ${JSON.stringify(`./${layout.manager}`)};`];
  if (layout.tool) exports.push(`export { JobTool } from ${JSON.stringify(`./${layout.tool}`)};`);
  if (layout.wait) exports.push(`export { WaitTool } from ${JSON.stringify(`./${layout.wait}`)};`);
  if (layout.control) exports.push(`export { executeCancel } from ${JSON.stringify(`./${layout.control}`)};`);
  exports.push(`export { logger } from "@oh-my-pi/pi-utils";`);
  fs.mkdirSync(options.out, { recursive: true });
  const outfile = path.join(options.out, 'upstream.mjs');
  await esbuild.build({
    stdin: { contents: exports.join('\n'), resolveDir: options.upstream, sourcefile: 'entry.mjs', loader: 'js' },
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    outfile,
    plugins: [standIns()],
    logLevel: 'warning',
  });
  const info = { name: '@oh-my-pi/pi-coding-agent', version, source: options.upstream, layout };
  fs.writeFileSync(path.join(options.out, 'upstream.json'), `${JSON.stringify(info, null, 2)}\n`);
  process.stdout.write(`built ${outfile} from @oh-my-pi/pi-coding-agent ${version}\n`);
}

main().catch((err) => {
  process.stderr.write(`build.mjs: ${err.message}\n`);
  process.exit(1);
});

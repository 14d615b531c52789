// Module resolution hook (node:module register): the registry's chunk has
// one import with no bindings, `import "./utils-<hash>.mjs"`, the package's
// shared utilities, which pull in the whole runtime and its dependencies
// (not installed by `npm pack`). The registry uses nothing from it, so that
// one import, from that one chunk, resolves to an empty module. Every other
// import resolves as Node resolves it.

const EMPTY = 'data:text/javascript,export {};';
const REGISTRY_CHUNK = /\/bash-process-registry-[A-Za-z0-9_-]+\.mjs$/;
const SIDE_EFFECT_UTILS = /^\.\/utils-[A-Za-z0-9_-]+\.mjs$/;

export async function resolve(specifier, context, nextResolve) {
  if (SIDE_EFFECT_UTILS.test(specifier) && context.parentURL && REGISTRY_CHUNK.test(context.parentURL)) {
    return { url: EMPTY, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}

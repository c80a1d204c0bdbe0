import { registerHooks } from 'node:module'

// Loaded first by the command (bin/mailroom.js) and by each thread (`--import`, THREAD_EXEC_ARGV):
// Node 22 and 24 look up the package.json of every `.js` file they load as an ES module, and parse
// that file's whole `exports` map again each time (nodejs/node#58126). drizzle-orm's package.json
// is 179 KB and the store loads about 110 of its modules: 2 to 3 s of CPU at each start of the
// command and of each thread, where Node 20 took 0.2 s. drizzle-orm is "type": "module" and its
// modules import each other by relative path, so those imports are resolved here, as Node would,
// without the look-up; every other import goes to Node as usual.
const PACKAGE = '/node_modules/drizzle-orm/'

/** Where an import inside drizzle-orm leads, when it is a relative `.js` path within the package. */
export function drizzleInternal(specifier: string, parentURL: string | undefined): string | undefined {
  const root = parentURL?.lastIndexOf(PACKAGE) ?? -1
  if (root < 0 || !/^\.\.?\//.test(specifier) || !specifier.endsWith('.js')) return undefined
  const url = new URL(specifier, parentURL).href
  return url.startsWith(parentURL!.slice(0, root + PACKAGE.length)) ? url : undefined
}

registerHooks({
  resolve(specifier, context, nextResolve) {
    const url = drizzleInternal(specifier, context.parentURL)
    return url ? { url, format: 'module', shortCircuit: true } : nextResolve(specifier, context)
  },
})

/** The `execArgv` of a worker thread: the process's own, and this module loaded first. */
export const THREAD_EXEC_ARGV = [...process.execArgv, '--import', import.meta.url]

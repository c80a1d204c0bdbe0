import { registerHooks } from 'node:module'
import { Worker, type WorkerOptions } from 'node:worker_threads'

// Loaded first by the command (bin/mailroom.js) and by each thread (`--import`, startThread):
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

/** What a worker thread loads first: this module. */
const LOAD_FIRST = ['--import', import.meta.url]

/** The process's options a thread is given: all of them, until a thread refuses one. */
let threadOptions = process.execArgv

/**
 * A worker thread running `url`, given the process's own options and this module loaded first.
 * A thread refuses V8's options (`node --max-old-space-size=512`) and the process's (`--title`)
 * with ERR_WORKER_INVALID_EXEC_ARGV, while they already hold for the whole process: only then is
 * each option tried alone, in a thread stopped at once, and those refused are left out of this
 * thread and every later one.
 */
export function startThread(url: URL, options: Omit<WorkerOptions, 'execArgv'>): Worker {
  try {
    return new Worker(url, { ...options, execArgv: [...threadOptions, ...LOAD_FIRST] })
  } catch (err) {
    if (!refusedOptions(err)) throw err
  }
  threadOptions = process.execArgv.filter((option) => {
    try {
      void new Worker('', { eval: true, execArgv: [option], stdout: true, stderr: true }).terminate()
      return true
    } catch (err) {
      if (refusedOptions(err)) return false
      throw err
    }
  })
  return new Worker(url, { ...options, execArgv: [...threadOptions, ...LOAD_FIRST] })
}

const refusedOptions = (err: unknown) => (err as { code?: string }).code === 'ERR_WORKER_INVALID_EXEC_ARGV'

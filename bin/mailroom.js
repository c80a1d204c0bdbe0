#!/usr/bin/env node
// The package's command: the compiled CLI (built once, by `npm install` through the prepare script).
import module from 'node:module'

// Node 22.1 and later keep the compiled code of the modules a command loads, so that the next
// start of the command skips compiling them again; Node 20 has no such cache.
module.enableCompileCache?.()

// Imported only now, so that the cache above already applies to the CLI's modules.
const { main } = await import('../dist/cli/index.js')

main(process.argv).catch((err) => {
  process.stderr.write(`mailroom: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})

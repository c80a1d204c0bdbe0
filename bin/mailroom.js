#!/usr/bin/env node
// The package's command: the compiled CLI (built once, by `npm install` through the prepare script).
import module from 'node:module'

// Checked before the CLI is loaded: on an older Node its dependencies fail with errors that do not
// say why. 22.19 is the newest floor of the dependencies' `engines` (package.json's own).
const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`mailroom needs Node.js 22.19 or newer (this is ${process.version})\n`)
  process.exit(1)
}

// Node keeps the compiled code of the modules a command loads, so that the next start of the
// command skips compiling them again.
module.enableCompileCache?.()

// Before the CLI's modules are resolved: see esm-resolve.ts. Imported only now, so that the cache
// above already applies to them.
await import('../dist/esm-resolve.js')
const { main } = await import('../dist/cli/index.js')
main(process.argv).catch((err) => {
  process.stderr.write(`mailroom: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})

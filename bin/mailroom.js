#!/usr/bin/env node
// The package's command: the compiled CLI (built by `npm install` through the prepare script).
import { main } from '../dist/cli/index.js'

main(process.argv).catch((err) => {
  process.stderr.write(`mailroom: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})

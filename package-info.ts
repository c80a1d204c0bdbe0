import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** name, version and description from the package.json above this module (found from src and from dist/ alike). */
export const PACKAGE: { name: string; version: string; description: string } = (() => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const file = join(dir, 'package.json')
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8'))
    const up = dirname(dir)
    if (up === dir) throw new Error('package.json not found')
    dir = up
  }
})()

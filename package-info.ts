import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

interface PackageJson {
  name: string
  version: string
  description: string
  bin: Record<string, string>
}

/**
 * name, version and description from the package.json above this module (found from src and from
 * dist/ alike), and `product`: the name of its command, `mailroom`, which names the server to its
 * peers (MCP serverInfo, User-Agent); the package's own name is scoped (`@…/mailroom`).
 */
export const PACKAGE: { name: string; version: string; description: string; product: string } = (() => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const file = join(dir, 'package.json')
    if (existsSync(file)) {
      const { name, version, description, bin } = JSON.parse(readFileSync(file, 'utf8')) as PackageJson
      return { name, version, description, product: Object.keys(bin)[0] }
    }
    const up = dirname(dir)
    if (up === dir) throw new Error('package.json not found')
    dir = up
  }
})()

import { readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

// The relay and the tools see storage only through its interface (storage/store.ts) and openStore
// (storage/index.ts): nothing outside storage/ may depend on which database is behind the Store.

/** The storage modules each file of a directory imports, as `file: module`. */
function storageImports(dir: string): string[] {
  const root = new URL(`../../${dir}/`, import.meta.url)
  return readdirSync(root)
    .filter((f) => f.endsWith('.ts'))
    .flatMap((f) =>
      [...readFileSync(new URL(f, root), 'utf8').matchAll(/from '\.\.\/storage\/([^']+)'/g)].map(
        (m) => `${dir}/${f}: ${m[1]}`,
      ),
    )
}

/** storage/'s public modules: the Store interface, and openStore, which chooses the backend. */
const PUBLIC = ['store.js', 'index.js']

describe('the storage seam', () => {
  it.each(['relay', 'tools'])('%s/ imports only the Store interface and openStore from storage/', (dir) => {
    const leaks = storageImports(dir).filter((i) => !PUBLIC.some((p) => i.endsWith(`: ${p}`)))
    expect(leaks).toEqual([])
  })
})

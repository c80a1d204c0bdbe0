import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { ConfigSchema } from '../config.js'

// The README and docs/ are what a user reads first: their links lead somewhere, and the settings
// they name are the settings there are.
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const DOCS = ['README.md', 'bench/README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)]
const text = (file: string) => readFileSync(join(ROOT, file), 'utf8')

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-')
const anchorsOf = (file: string) => new Set([...text(file).matchAll(/^#+ (.+)$/gm)].map((m) => anchor(m[1])))

describe('documentation', () => {
  it.each(DOCS)('%s: every relative link names a file of the repository, and a heading in it', (file) => {
    const broken: string[] = []
    for (const [, target] of text(file).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/i.test(target)) continue
      const [path, hash] = target.split('#')
      const linked = path ? join(dirname(file), path) : file
      if (!existsSync(join(ROOT, linked))) broken.push(`${target}: no such file`)
      else if (hash && linked.endsWith('.md') && !anchorsOf(linked).has(hash)) broken.push(`${target}: no such heading`)
    }
    expect(broken).toEqual([])
  })

  // `npx mailroom` in the project folder installs the folder into npm's npx cache (a whole build
  // the first time, seconds every time), and anywhere else fetches the registry's `mailroom`, which
  // is somebody else's package. npx may run our package by its own name, or a dependency.
  it('no page runs `mailroom` through npx or npm exec', () => {
    const pkg = JSON.parse(text('package.json'))
    const ours = [pkg.name, ...Object.keys(pkg.dependencies), ...Object.keys(pkg.devDependencies)]
    // What a reader copies: code blocks and code spans.
    const code = (file: string) =>
      [...text(file).matchAll(/```[a-z]*\n([\s\S]*?)```|`([^`\n]+)`/g)].map((m) => m[1] ?? m[2]).join('\n')
    const runs = DOCS.flatMap((file) => [
      ...[...code(file).matchAll(/\b(?:npx|npm exec|npm x)((?: +[^\s`#]+)+)/g)].map((m) => ({
        file,
        words: m[1].trim().split(/ +/),
      })),
      // A desktop assistant's configuration: "command": "npx", "args": [...].
      ...[...code(file).matchAll(/"command": *"npx",\s*"args": *(\[[^\]]*\])/g)].map((m) => ({
        file,
        words: JSON.parse(m[1]) as string[],
      })),
    ])
    expect(runs.length).toBeGreaterThan(0)
    const wrong = runs.filter(
      ({ words }) => words.includes('mailroom') || !ours.includes(words.find((w) => !w.startsWith('-')) ?? ''),
    )
    expect(wrong.map(({ file, words }) => `${file}: npx ${words.join(' ')}`)).toEqual([])
  })

  it('docs/configuration.md lists every setting, and no page names one that does not exist', () => {
    const settings = Object.keys(ConfigSchema.shape)
    // Read by the tests, not by mailroom: where the PostgreSQL suites find a server, and the browser tests a browser.
    const testSettings = ['MAILROOM_TEST_DATABASE_URL', 'MAILROOM_TEST_CHROMIUM']
    const reference = text('docs/configuration.md')
    expect(settings.filter((s) => !reference.includes(`\`${s}\``))).toEqual([])
    const named = DOCS.flatMap((file) =>
      [...text(file).matchAll(/\bMAILROOM_[A-Z0-9_]+/g)].map((m) => `${file}: ${m[0]}`),
    )
    expect(named.filter((n) => ![...settings, ...testSettings].includes(n.split(': ')[1]))).toEqual([])
  })
})

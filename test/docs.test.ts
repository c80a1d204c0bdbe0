import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { ConfigSchema, KNOWN_SETTINGS } from '../config.js'

// The README and docs/ are what a user reads first: their links lead somewhere, and the settings
// they name are the settings there are.
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const DOCS = [
  'README.md',
  'CHANGELOG.md',
  'bench/README.md',
  ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`),
]
const text = (file: string) => readFileSync(join(ROOT, file), 'utf8')

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-')
/** Every MAILROOM_ name in the files, as `file: name`. */
const namedSettings = (files: string[]) =>
  files.flatMap((file) => [...text(file).matchAll(/\bMAILROOM_[A-Z0-9_]+/g)].map((m) => `${file}: ${m[0]}`))
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
    const reference = text('docs/configuration.md')
    expect(settings.filter((s) => !reference.includes(`\`${s}\``))).toEqual([])
    expect(namedSettings(DOCS).filter((n) => !KNOWN_SETTINGS.includes(n.split(': ')[1]))).toEqual([])
  })

  // An unknown MAILROOM_ variable stops the start (config.ts): every one the code reads or sets
  // must be known, or the start it is meant for would be refused. The tests are left out: they
  // misspell settings on purpose, and a child they start with a name the code does not know is
  // refused there.
  it('knows every MAILROOM_ variable that the code, the scripts and CI name', () => {
    const skipped = new Set(['node_modules', 'dist', '.git', '.peers', 'data'])
    const files = (dir: string): string[] =>
      readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
        const path = dir ? `${dir}/${e.name}` : e.name
        if (e.isDirectory()) return skipped.has(e.name) ? [] : files(path)
        return /\.(ts|tsx|js|sh|json)$|^\.ci\/run$/.test(path) && !path.endsWith('.test.ts') ? [path] : []
      })
    const code = files('')
    expect(code).toEqual(expect.arrayContaining(['config.ts', 'test/system/peers.sh', '.ci/run']))
    expect(namedSettings(code).filter((n) => !KNOWN_SETTINGS.includes(n.split(': ')[1]))).toEqual([])
  })

  it('README.md and docs/api.md say what the contract and the hosted service are where they first name them', () => {
    for (const file of ['README.md', 'docs/api.md']) {
      const prose = text(file).replace(/\s+/g, ' ')
      const first = prose.search(/\bthe contract\b|\bhosted service\b/i)
      expect(first, file).toBeGreaterThan(0)
      expect(prose.slice(first, first + 400), file).toMatch(
        /the REST API of a hosted mail delivery and management service .*public OpenAPI document/,
      )
    }
  })

  it('gives the submission ports for production: 587 for STARTTLS, 465 for implicit TLS, wherever they are named', () => {
    const said = DOCS.flatMap((file) =>
      text(file)
        .split('\n')
        .flatMap((line) => {
          const setting = /`(MAILROOM_SMTPS?_PORT)`/.exec(line)?.[1]
          const port = /(\d+) in production/.exec(line)?.[1]
          return setting && port ? [`${file}: ${setting} ${port}`] : []
        }),
    )
    expect(said).toEqual(
      ['README.md', 'docs/configuration.md'].flatMap((file) => [
        `${file}: MAILROOM_SMTP_PORT 587`,
        `${file}: MAILROOM_SMTPS_PORT 465`,
      ]),
    )
  })
})

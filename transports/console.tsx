import type { Context, Hono } from 'hono'
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import type { Config } from '../config.js'
import { PAGES, type PageName, type Submission } from './console-layout.js'
import { renderPage } from './console-pages.js'

/**
 * What every console answer carries. The pages run only the console's own scripts and styles
 * (no inline script, no eval, no inline style), talk only to this server, cannot be framed, and
 * submit no form by themselves (their scripts handle every form): the API key typed into the
 * sign-in form can never end up in a URL.
 */
export const CONSOLE_HEADERS = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  Vary: 'Accept-Encoding',
}

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.html': 'text/html; charset=utf-8',
}

/** A response body kept as it is and gzipped, for clients that take gzip. */
interface Prepared {
  type: string
  plain: Buffer
  gzip: Buffer
}

const prepare = (type: string, plain: Buffer): Prepared => ({ type, plain, gzip: gzipSync(plain, { level: 9 }) })

/** The console's scripts and styles: beside this module in the source tree, two levels up from dist/transports/. */
function assetDir(): string {
  const here = fileURLToPath(new URL('.', import.meta.url))
  return here.includes(join('dist', 'transports'))
    ? join(here, '..', '..', 'transports', 'console')
    : join(here, 'console')
}

type Assets = { version: string; files: Map<string, Prepared> }
let loaded: Assets | undefined

/**
 * The console's assets, read and gzipped once per process (they are part of the package); their
 * version is a hash of them all, so that a new release is never served from a stale cache.
 */
function loadAssets(): Assets {
  loaded ??= readAssets()
  return loaded
}

function readAssets(): Assets {
  const dir = assetDir()
  const files = new Map<string, Prepared>()
  const hash = createHash('sha256')
  for (const name of readdirSync(dir).sort()) {
    const type = TYPES[extname(name)]
    if (!type) continue
    const bytes = readFileSync(join(dir, name))
    hash.update(name).update(bytes)
    files.set(name, prepare(type, bytes))
  }
  return { version: hash.digest('hex').slice(0, 12), files }
}

/** How a mail program reaches SMTP submission: the host it listens on, or the public URL's host when it listens on every address. */
export function submissionOf(config: Config): Submission {
  const wildcard = ['0.0.0.0', '::', '[::]'].includes(config.smtp.host)
  return {
    host: wildcard ? new URL(config.publicUrl).hostname : config.smtp.host,
    port: config.smtp.port,
    securePort: config.smtp.securePort,
    authRequiresTls: config.smtp.authRequiresTls,
  }
}

function send(c: Context, body: Prepared, cacheControl: string): Response {
  const gzip = /\bgzip\b/i.test(c.req.header('accept-encoding') ?? '')
  return c.body(new Uint8Array(gzip ? body.gzip : body.plain), 200, {
    ...CONSOLE_HEADERS,
    'Content-Type': body.type,
    'Cache-Control': cacheControl,
    ...(gzip ? { 'Content-Encoding': 'gzip' } : {}),
  })
}

/**
 * The browser console at /console: pages rendered once, as shells that their scripts
 * fill from the REST API with the key the person signed in with (kept in the tab's
 * sessionStorage, never in a cookie: no other site's request can carry it). Assets under a
 * versioned path, cached for a year; everything gzipped for clients that take it.
 */
export function mountConsole(app: Hono, config: Config): void {
  const { version, files } = loadAssets()
  const asset = (name: string) => `/console/assets/${version}/${name}`
  const settings = { smtp: submissionOf(config), priced: config.pricing.priced }
  for (const [page, { path }] of Object.entries(PAGES)) {
    // Rendered at its first request, then kept: a page is the same for everyone.
    let html: Prepared | undefined
    app.get(path, (c) => {
      html ??= prepare(TYPES['.html'], Buffer.from(renderPage(page as PageName, asset, settings)))
      return send(c, html, 'no-cache')
    })
  }
  app.get('/console/', (c) => c.redirect('/console'))
  app.get('/console/assets/:version/:name', (c) => {
    const file = files.get(c.req.param('name'))
    if (!file) return c.notFound()
    // An asset of another version (a page from before an upgrade) is served, but not kept.
    const current = c.req.param('version') === version
    return send(c, file, current ? 'public, max-age=31536000, immutable' : 'no-cache')
  })
}

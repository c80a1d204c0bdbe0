import { gunzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../config.js'
import { CONSOLE_HEADERS, submissionOf } from '../../transports/console.js'
import { PAGES } from '../../transports/console-layout.js'
import { createTestEnv, type TestEnv } from '../helpers.js'

const PATHS = Object.values(PAGES).map((p) => p.path)

/** The assets a page links to: its stylesheet, icon and script. */
const assetsOf = (html: string) => [...html.matchAll(/(?:href|src)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1])

describe('the console, as served', () => {
  let env: TestEnv
  beforeAll(async () => {
    env = await createTestEnv({ MAILROOM_SMTP_HOST: '0.0.0.0', MAILROOM_PUBLIC_URL: 'https://mail.example.com' })
  })
  afterAll(() => env.close())
  const get = (path: string, headers: Record<string, string> = {}) => env.app.request(path, { headers })

  it.each(PATHS)('%s: a page without a key, with the security headers, and no inline script or style', async (path) => {
    const res = await get(path)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8')
    for (const [name, value] of Object.entries(CONSOLE_HEADERS)) expect(res.headers.get(name)).toBe(value)
    expect(res.headers.get('content-security-policy')).toMatch(/script-src 'self';/)
    expect(res.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/)
    expect(res.headers.get('cache-control')).toBe('no-cache')
    expect(res.headers.get('set-cookie')).toBeNull()
    const html = await res.text()
    expect(html).toMatch(/^<!doctype html><html lang="en">/)
    // Every script is a file of the console's own; nothing runs from the page's text.
    expect([...html.matchAll(/<script[^>]*>/g)].map((m) => m[0])).toEqual([
      expect.stringMatching(/^<script type="module" src="\/console\/assets\/[0-9a-f]{12}\/[\w-]+\.js">$/),
    ])
    expect(html).not.toMatch(/\son\w+=|\sstyle=|<style|javascript:/i)
  })

  it('labels every control of every page', async () => {
    for (const path of PATHS) {
      const html = await (await get(path)).text()
      const ids = new Set([...html.matchAll(/<label for="([^"]+)"/g)].map((m) => m[1]))
      for (const [control] of html.matchAll(/<(input|select)\b[^>]*>/g)) {
        const id = /\sid="([^"]+)"/.exec(control)?.[1]
        expect(id && ids.has(id), `${path}: ${control}`).toBe(true)
      }
    }
  })

  it('serves each asset a page links to, gzipped when asked, cached for a year under its version', async () => {
    const assets = new Set<string>()
    for (const path of PATHS) for (const a of assetsOf(await (await get(path)).text())) assets.add(a)
    expect(assets.size).toBeGreaterThan(6)
    for (const asset of assets) {
      const plain = await get(asset)
      expect(plain.status, asset).toBe(200)
      expect(plain.headers.get('content-encoding')).toBeNull()
      expect(plain.headers.get('cache-control')).toBe('public, max-age=31536000, immutable')
      expect(plain.headers.get('x-content-type-options')).toBe('nosniff')
      const body = Buffer.from(await plain.arrayBuffer())
      const gzipped = await get(asset, { 'Accept-Encoding': 'gzip, deflate, br' })
      expect(gzipped.headers.get('content-encoding')).toBe('gzip')
      expect(gzipped.headers.get('vary')).toBe('Accept-Encoding')
      const packed = Buffer.from(await gzipped.arrayBuffer())
      expect(gunzipSync(packed).equals(body)).toBe(true)
      expect(packed.length).toBeLessThan(body.length)
    }
  })

  it("serves every module a script imports, so that no page's script fails on a missing one", async () => {
    const base = assetsOf(await (await get('/console/log')).text())[0].replace(/[^/]+$/, '')
    const seen = new Set<string>()
    const queue = ['overview.js', 'log.js', 'blocks.js', 'rules.js', 'orders.js', 'sign-in.js']
    while (queue.length) {
      const name = queue.pop()!
      if (seen.has(name)) continue
      seen.add(name)
      const res = await get(base + name)
      expect(res.status, name).toBe(200)
      expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
      for (const [, imported] of (await res.text()).matchAll(/from '\.\/([\w-]+\.js)'/g)) queue.push(imported)
    }
    expect([...seen].sort()).toEqual(expect.arrayContaining(['api.js', 'dom.js', 'shell.js', 'story.js', 'charts.js']))
  })

  it('is under 200 KB on the wire, every page and asset gzipped', async () => {
    const urls = new Set<string>(PATHS)
    for (const path of PATHS) for (const a of assetsOf(await (await get(path)).text())) urls.add(a)
    const base = [...urls].find((u) => u.endsWith('/log.js'))!.replace(/[^/]+$/, '')
    for (const name of ['api.js', 'dom.js', 'shell.js', 'story.js', 'charts.js']) urls.add(base + name)
    let bytes = 0
    for (const url of urls) bytes += (await (await get(url, { 'Accept-Encoding': 'gzip' })).arrayBuffer()).byteLength
    expect(bytes).toBeLessThan(200 * 1024)
  })

  it('answers 404 for an asset that does not exist, and serves one of another version without keeping it', async () => {
    for (const name of ['nope.js', '__proto__', 'constructor', '..%2Fconsole.tsx']) {
      expect((await get(`/console/assets/000000000000/${name}`)).status, name).toBe(404)
    }
    const old = await get('/console/assets/000000000000/api.js')
    expect(old.status).toBe(200)
    expect(old.headers.get('cache-control')).toBe('no-cache')
    const slash = await get('/console/')
    expect(slash.status).toBe(302)
    expect(slash.headers.get('location')).toBe('/console')
  })

  it('names the SMTP settings a mail program needs: the public host when SMTP listens on every address', async () => {
    const html = await (await get('/console/orders')).text()
    expect(html).toContain('<code id="smtp-host">mail.example.com</code>')
    expect(html).toContain('<code id="smtp-port">2525</code>')
    expect(html).toContain('<code id="smtp-secure-port">2465</code>')
    const own = submissionOf(loadConfig({ MAILROOM_SMTP_HOST: '192.0.2.7', MAILROOM_SMTPS_PORT: 'off' }))
    expect(own).toEqual({ host: '192.0.2.7', port: 2525, securePort: null, authRequiresTls: true })
  })
})

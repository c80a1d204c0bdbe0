import { serve, type ServerType } from '@hono/node-server'
import type { AddressInfo } from 'node:net'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createTestEnv, type TestEnv } from '../helpers.js'
import { describeBrowser, launchChromium } from './chromium.js'

describeBrowser('system: the API documentation page keeps its key in the tab, in a browser', () => {
  let env: TestEnv
  let server: ServerType
  let base: string
  let browser: Browser
  beforeAll(async () => {
    env = await createTestEnv()
    server = serve({ fetch: env.app.fetch, hostname: '127.0.0.1', port: 0 })
    await new Promise((r) => server.once('listening', r))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    browser = await launchChromium()
  })
  afterAll(async () => {
    await browser?.close()
    await new Promise((r) => server.close(r))
    await env.close()
  })

  /** The keys swagger-ui holds as authorized now, as the page's state has them. */
  const authorizedKeys = (page: Page) =>
    page.evaluate(() => {
      const ui = (window as unknown as { ui: { authSelectors: { authorized(): { toJS(): object } } } }).ui
      return JSON.stringify(ui.authSelectors.authorized().toJS())
    })
  const opened = async (page: Page) => {
    await page.goto(`${base}/docs/`)
    await page.locator('button.authorize').waitFor()
  }

  it('keeps the key typed into Authorize in sessionStorage only: a reload keeps it, another tab has none', async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    await opened(page)
    await page.locator('button.authorize').click()
    // The X-API-KEY scheme's form, the first of the dialog's (the bearer scheme's is below it).
    const form = page.locator('.auth-container').first()
    await form.locator('input').first().fill(env.apiKey)
    await form.locator('button.authorize').click()
    await page.locator('.auth-container button.btn-done').first().click()
    expect(await authorizedKeys(page)).toContain(env.apiKey)
    const storage = () =>
      page.evaluate(() => ({
        session: Object.values(sessionStorage).join(' '),
        local: Object.values(localStorage).join(' '),
        cookies: document.cookie,
      }))
    const kept = await storage()
    expect(kept.session).toContain(env.apiKey)
    expect(kept.local).not.toContain(env.apiKey)
    expect(kept.cookies).not.toContain(env.apiKey)

    await page.reload()
    await page.locator('button.authorize.locked').waitFor()
    expect(await authorizedKeys(page)).toContain(env.apiKey)

    const other = await context.newPage()
    await opened(other)
    expect(await authorizedKeys(other)).not.toContain(env.apiKey)
    expect(await other.locator('button.authorize.locked').count()).toBe(0)

    // Logging out forgets it in the tab too.
    await page.locator('button.authorize').click()
    await page.locator('.auth-container button', { hasText: 'Logout' }).click()
    expect((await storage()).session).not.toContain(env.apiKey)
    await context.close()
  })
})

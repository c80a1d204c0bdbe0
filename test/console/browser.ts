import { mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { describe, expect } from 'vitest'
import { createAccount, createOrder } from '../../accounts.js'
import type { RunningServer } from '../../serve.js'
import { PAGES } from '../../transports/console-layout.js'
import { openRuntime, type Runtime } from '../../runtime.js'
import { silentLogger, startTestServer } from '../helpers.js'
import { startSink } from '../relay/sink.js'
import { describeBrowser, launchChromium } from '../system/chromium.js'

/** The widths the console is checked at: a laptop's, and a phone's. */
export const VIEWPORTS = [
  { name: '1280 px', viewport: { width: 1280, height: 800 } },
  { name: '375 px', viewport: { width: 375, height: 740 }, isMobile: true },
]

/**
 * How long a test that visits every page may take: a few seconds a page on a busy machine. The
 * console's pages grow in number; a tour's time grows with them.
 */
export const TOUR_MS = 10_000 + Object.keys(PAGES).length * 6_000

/** Where each test leaves its screenshot. */
export const SCREENSHOTS = join(tmpdir(), `mailroom-console-${process.pid}`)

/** A suite of the console's tests, run in Chromium when it is there (see describeBrowser). */
export function describeChromium(name: string, suite: () => void): void {
  describeBrowser(name, () => describe(name, suite))
}

/** Recipients the sink refuses as unknown (a hard bounce: the address is then suppressed). */
export const UNKNOWN = /^nobody/
/** Recipients the sink defers: their messages wait, and their bodies are kept. */
export const WAITING = /^later/

/**
 * `mailroom serve` as built, delivering to an in-process SMTP sink, with a second account, the
 * spam traps `traps`, and Chromium. `api` calls REST as the first account (or with another key).
 */
export async function startConsole(
  traps: string[] = [],
  options: { env?: Record<string, string>; setup?: (admin: Runtime) => Promise<void> } = {},
) {
  const sink = await startSink()
  sink.state.rcptRule = (rcpt) =>
    UNKNOWN.test(rcpt)
      ? { code: 550, message: `5.1.1 <${rcpt}>: Recipient address rejected: User unknown` }
      : WAITING.test(rcpt)
        ? { code: 451, message: '4.3.0 try again later' }
        : undefined
  const started = await startTestServer('mailroom-console-', {
    MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
    ...options.env,
  })
  const server: RunningServer = started.server
  const base = `http://127.0.0.1:${server.httpPort}`
  const admin = await openRuntime(started.config, { logger: silentLogger })
  const other = await createAccount(admin, 'other')
  const otherOrder = await createOrder(admin, other.account.id, 'theirs', [])
  for (const trap of traps) await admin.store.traps.add(trap, Date.now())
  const sandboxKey = (await admin.store.apiKeys.create(1, Date.now(), { sandbox: true })).key
  await options.setup?.(admin)
  await admin.close()
  const browser = await launchChromium()
  const api = async (method: string, path: string, body?: unknown, key = started.apiKey) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { 'X-API-KEY': key, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, body: await res.json() }
  }
  return {
    base,
    server,
    sink,
    browser,
    api,
    apiKey: started.apiKey,
    /** A sandbox key of the same account. */
    sandboxKey,
    config: started.config,
    smtp: started.smtp,
    other: { apiKey: other.apiKey, username: `mb${otherOrder.order.id}` },
    /** Waits until every row of transaction `txid` is final (delivered or failed). */
    async settled(txid: string, key = started.apiKey) {
      await expect
        .poll(
          async () => {
            const log = (await api('GET', `/mail/log?mailid=${txid}`, undefined, key)).body
            return (
              log.emails.length > 0 &&
              log.emails.every(
                (e: { delivered: number; code: number | null }) => e.delivered === 1 || (e.code ?? 0) >= 500,
              )
            )
          },
          { timeout: 15_000, interval: 100 },
        )
        .toBe(true)
    },
    async close() {
      await browser.close()
      await server.stop()
      await sink.close()
      rmSync(started.dataDir, { recursive: true, force: true })
    },
  }
}

export type ConsoleEnv = Awaited<ReturnType<typeof startConsole>>

/**
 * A new browser context (its own sessionStorage) and page. Errors the page throws and Content
 * Security Policy violations are collected: `problems()` should stay empty.
 */
export async function newPage(
  env: ConsoleEnv,
  options: Parameters<Browser['newContext']>[0] = {},
): Promise<{ context: BrowserContext; page: Page; problems: () => string[] }> {
  const context = await env.browser.newContext(options)
  // A wait that fails, fails well within the test's own timeout, saying what it waited for.
  context.setDefaultTimeout(5000)
  const page = await context.newPage()
  const problems: string[] = []
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`))
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text())
  })
  return { context, page, problems: () => problems }
}

/** Waits until a signed-in page's first load from the API has ended: its main part is no longer busy. */
export const loaded = (page: Page) => page.locator('main:not([aria-busy])').waitFor()

/** Signs in through the sign-in page and waits for the overview (or the page asked for first). */
export async function signIn(page: Page, base: string, key: string, landing = '/console'): Promise<void> {
  if (!page.url().includes('/console/sign-in')) await page.goto(`${base}/console/sign-in`)
  await page.getByLabel('API key').fill(key)
  await page.getByLabel('API key').press('Enter')
  await page.waitForURL(`${base}${landing}`)
}

/** Saves a screenshot named `name` under SCREENSHOTS: the whole page, or what is in view (a dialog) with `fullPage` false. */
export async function screenshot(page: Page, name: string, fullPage = true): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true })
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage })
}

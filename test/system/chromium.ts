import { existsSync } from 'node:fs'
import { chromium, type Browser } from 'playwright-core'
import { describe, it } from 'vitest'

/** The browser the browser tests drive: Debian's chromium, or MAILROOM_TEST_CHROMIUM. */
export const CHROMIUM = process.env.MAILROOM_TEST_CHROMIUM ?? '/usr/bin/chromium'

/** A headless Chromium with nothing of its own going on (no updates, sync or background requests). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
}

/**
 * Registers `suite` (its tests drive a real browser) when Chromium is there. Without it, in CI
 * (CI=true) a test that fails with the reason stands in its place; elsewhere the suite is skipped
 * with a warning that says why.
 */
export function describeBrowser(name: string, suite: () => void): void {
  if (existsSync(CHROMIUM)) {
    suite()
    return
  }
  const reason = `no Chromium at ${CHROMIUM} (MAILROOM_TEST_CHROMIUM; Debian's package is chromium)`
  if (process.env.CI === 'true') {
    describe(name, () => {
      it('has a browser to drive', () => {
        throw new Error(reason)
      })
    })
    return
  }
  console.warn(`SKIPPED ${name}: ${reason}`)
  describe.skip(name, () => {
    it('needs Chromium', () => {})
  })
}

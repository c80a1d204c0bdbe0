import { existsSync } from 'node:fs'
import { chromium, type Browser } from 'playwright-core'
import { describeWith } from './peers.js'

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
 * Registers `suite` (its tests drive a real browser) when Chromium is there; see describeWith for
 * what stands in its place without it.
 */
export function describeBrowser(name: string, suite: () => void): void {
  const missing = existsSync(CHROMIUM)
    ? undefined
    : `no Chromium at ${CHROMIUM} (MAILROOM_TEST_CHROMIUM; Debian's package is chromium)`
  describeWith(name, 'has a browser to drive', missing, suite)
}

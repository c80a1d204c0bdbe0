import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { Page } from 'playwright-core'
import { expect } from 'vitest'

/** axe-core's script, read once from node_modules (no network). */
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

interface Violation {
  id: string
  impact: string | null
  help: string
  nodes: { target: unknown[] }[]
}

/**
 * Runs axe-core (WCAG 2.2 A and AA, and its best practices) on the page as it is now, and expects
 * no serious or critical violation; each one found is named with its rule, help and elements.
 * The script is evaluated through the DevTools protocol, which the page's Content-Security-Policy
 * does not govern; a message's sandboxed frame (not the console's own markup) is left out.
 */
export async function expectAccessible(page: Page, where: string): Promise<void> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE)
  const violations = (await page.evaluate(async () => {
    const axe = (window as any).axe
    const result = await axe.run(document, { iframes: false, resultTypes: ['violations'] })
    return result.violations
  })) as Violation[]
  const serious = violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`)
  expect(serious, where).toEqual([])
}

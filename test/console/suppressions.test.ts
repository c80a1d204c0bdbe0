import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type ConsoleEnv, describeChromium, newPage, screenshot, signIn, startConsole } from './browser.js'

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

/** axe-core's serious and critical violations on the page as it is now, one line each. */
async function seriousViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(`${AXE}\n;0`)
  return page.evaluate(async () => {
    type Result = { violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }
    const { axe } = window as unknown as { axe: { run(): Promise<Result> } }
    return (await axe.run()).violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)
  })
}

const WIDTHS = [
  { width: 1280, options: { viewport: { width: 1280, height: 800 } } },
  { width: 375, options: { viewport: { width: 375, height: 740 }, isMobile: true } },
]

// The Blocks page's suppressed recipients (getSuppressions, delistBlock) and sandbox mail as the
// log, the story and the Overview show it, in Chromium at a desktop's and a phone's width.
describeChromium('console: suppressed recipients and sandbox mail', () => {
  let env: ConsoleEnv
  beforeAll(async () => {
    // A price, so that the Overview shows Cost, which sandbox mail must not add to.
    env = await startConsole([], { env: { MAILROOM_PRICE_PER_MESSAGE: '0.0002' } })
  })
  afterAll(() => env?.close())

  const send = async (fields: Record<string, string>, key = env.apiKey) => {
    const res = await env.api('POST', '/mail/send', { from: 'me@example.org', body: 'x', ...fields }, key)
    expect(res.status).toBe(200)
    return res.body.text as string
  }
  const open = async (path: string, options: object) => {
    const { context, page, problems } = await newPage(env, options)
    await page.goto(`${env.base}/console/sign-in`)
    await signIn(page, env.base, env.apiKey)
    await page.goto(`${env.base}${path}`)
    return { context, page, problems }
  }
  const fitsWidth = async (page: Page, width: number) =>
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(width)
  const suppressed = async () =>
    ((await env.api('GET', '/mail/suppressions')).body.suppressions as { address: string }[]).map((s) => s.address)

  for (const { width, options } of WIDTHS) {
    it(`Blocks at ${width} px: a recipient is listed right after its bounce, with the reason and the message`, async () => {
      const address = `nobody-${width}@example.com`
      const txid = await send({ to: address, subject: `bounce at ${width}` })
      await env.settled(txid)
      const { context, page, problems } = await open('/console/blocks', options)
      const row = page.locator('#suppressions tbody tr').filter({ hasText: address })
      await row.waitFor()
      const cells = await row.locator('td').allTextContents()
      expect(cells).toEqual([
        address,
        expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/),
        `an earlier message to it bounced: 550 5.1.1 <${address}>: Recipient address rejected: User unknown`,
        txid,
        'Delist',
      ])
      const api = (await env.api('GET', '/mail/suppressions')).body.suppressions.find(
        (s: { address: string }) => s.address === address,
      )
      expect(api).toMatchObject({ reason: cells[2], mailid: txid })
      expect(cells[1]).toBe(api.since.slice(0, 19).replace('T', ' '))
      await fitsWidth(page, width)
      expect(await seriousViolations(page)).toEqual([])
      await screenshot(page, `suppressions-${width}`)
      expect(problems()).toEqual([])
      await context.close()
    })

    it(`Blocks at ${width} px: the message of a suppression opens its story, over the log`, async () => {
      const address = `nobody-story-${width}@example.com`
      const txid = await send({ to: address, subject: `bounce at ${width}` })
      await env.settled(txid)
      const { context, page, problems } = await open('/console/blocks', options)
      const row = page.locator('#suppressions tbody tr').filter({ hasText: address })
      await row.getByRole('link', { name: txid }).click()
      const story = page.getByRole('dialog')
      await story.getByRole('heading', { name: `bounce at ${width}` }).waitFor()
      await story.locator('.timeline li.suppressed').waitFor()
      expect(new URL(page.url()).pathname).toBe('/console/log')
      expect(await seriousViolations(page)).toEqual([])
      expect(problems()).toEqual([])
      await context.close()
    })

    it(`Blocks at ${width} px: Delist asks first, Cancel keeps the suppression, Delist lifts it`, async () => {
      const address = `nobody-delisted-${width}@example.com`
      await env.settled(await send({ to: address, subject: `bounce to delist at ${width}` }))
      const { context, page, problems } = await open('/console/blocks', options)
      const row = page.locator('#suppressions tbody tr').filter({ hasText: address })
      const dialog = page.getByRole('dialog')
      await row.getByRole('button', { name: `Delist ${address}` }).click()
      expect(await dialog.locator('#confirm-text').textContent()).toBe(
        `Delist ${address}? Mail to ${address} will be accepted again, until it is blocked again.`,
      )
      expect(await seriousViolations(page)).toEqual([])
      await screenshot(page, `suppressions-confirm-${width}`, false)
      await dialog.getByRole('button', { name: 'Cancel' }).click()
      await dialog.waitFor({ state: 'hidden' })
      expect(await suppressed()).toContain(address)
      const refused = await env.api('POST', '/mail/send', {
        from: 'me@example.org',
        to: address,
        subject: 's',
        body: 'x',
      })
      expect([refused.status, refused.body.message]).toEqual([400, expect.stringMatching(/local block list/)])

      await row.getByRole('button', { name: `Delist ${address}` }).click()
      await dialog.getByRole('button', { name: 'Delist' }).click()
      await page
        .getByRole('status')
        .filter({ hasText: `${address} was delisted.` })
        .waitFor()
      await row.waitFor({ state: 'detached' })
      expect(await suppressed()).not.toContain(address)
      expect(await send({ to: address, subject: 'accepted again' })).toMatch(/^[0-9a-f]{18,19}$/)
      await fitsWidth(page, width)
      expect(problems()).toEqual([])
      await context.close()
    })

    it(`Overview at ${width} px: sandbox mail is out of usage and cost, and counted apart`, async () => {
      const billing = async () => (await env.api('GET', '/mail/stats?time=billing')).body
      const before = await billing()
      await env.settled(await send({ to: 'bob@example.com', subject: `counted at ${width}` }, env.sandboxKey))
      const after = await billing()
      // Sandbox mail is received, but neither usage nor cost. (Reports to senders of earlier
      // bounces may come meanwhile: they are received, and not billed either.)
      expect(after.usage).toBe(before.usage)
      expect(after.received - before.received).toBeGreaterThanOrEqual(1)
      const { context, page, problems } = await open('/console', options)
      await page.locator('#sandbox-figure').waitFor()
      const shown = await billing()
      const usage = Number(await page.locator('#usage').textContent())
      const stats = [after, shown].find((s) => s.usage === usage)
      expect(stats, `the page's usage ${usage}`).toBeDefined()
      expect(await page.locator('#cost').textContent()).toBe(
        new Intl.NumberFormat('en', { style: 'currency', currency: stats.currency }).format(stats.cost),
      )
      expect(await page.locator('#sandbox-figure').textContent()).toBe(
        `Not billed (sandbox mail, reports to senders)${shown.received - shown.usage}`,
      )
      await page.locator('#top-to li').first().waitFor()
      await fitsWidth(page, width)
      expect(await seriousViolations(page)).toEqual([])
      await screenshot(page, `overview-sandbox-${width}`)
      expect(problems()).toEqual([])
      await context.close()
    })

    it(`Log at ${width} px: sandbox mail has a badge in its row and its story, real mail none`, async () => {
      const sandbox = await send({ to: 'bob@example.com', subject: `sandbox at ${width}` }, env.sandboxKey)
      const real = await send({ to: 'bob@example.com', subject: `real at ${width}` })
      await Promise.all([env.settled(sandbox), env.settled(real)])
      const { context, page, problems } = await open(
        `/console/log?subject=${encodeURIComponent(`sandbox at ${width}`)}`,
        options,
      )
      const row = page.locator('#log tbody tr').filter({ hasText: `sandbox at ${width}` })
      await row.waitFor()
      expect(await row.locator('td').last().textContent()).toBe('Delivered sandbox')
      expect(await row.locator('.badge.sandbox').getAttribute('title')).toBe('Sandbox mail: recorded, never sent')
      await fitsWidth(page, width)
      expect(await seriousViolations(page)).toEqual([])
      await row.getByRole('button', { name: `sandbox at ${width}` }).click()
      const story = page.getByRole('dialog')
      await story.locator('.timeline li.delivered').waitFor()
      expect(await story.locator('.notice').first().textContent()).toBe(
        'sandbox Sandbox mail: it went through every check and is recorded, but it was never sent.',
      )
      expect(await seriousViolations(page)).toEqual([])
      await screenshot(page, `story-sandbox-${width}`, false)
      await page.keyboard.press('Escape')
      await story.waitFor({ state: 'hidden' })

      await page.goto(`${env.base}/console/log?mailid=${real}`)
      const realRow = page.locator('#log tbody tr').filter({ hasText: `real at ${width}` })
      await realRow.waitFor()
      expect(await realRow.locator('td').last().textContent()).toBe('Delivered')
      await realRow.getByRole('button', { name: `real at ${width}` }).click()
      await story.locator('.timeline li.delivered').waitFor()
      expect(await story.locator('.badge.sandbox').count()).toBe(0)
      expect(problems()).toEqual([])
      await context.close()
    })
  }
})

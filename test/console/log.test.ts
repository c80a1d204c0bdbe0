import type { Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type ConsoleEnv, describeChromium, newPage, screenshot, signIn, startConsole } from './browser.js'

// The Log page in Chromium: the table of viewMailLog, its filters and paging, and a message's
// story (getMessage) in a dialog over it.
describeChromium('console: the log and a message story', () => {
  let env: ConsoleEnv
  beforeAll(async () => {
    env = await startConsole()
  })
  afterAll(() => env?.close())

  const send = async (fields: Record<string, string>) => {
    const res = await env.api('POST', '/mail/send', { from: 'me@example.org', body: 'hello', ...fields })
    expect(res.status).toBe(200)
    return res.body.text as string
  }
  const openLog = async (query = '') => {
    const { context, page, problems } = await newPage(env)
    await page.goto(`${env.base}/console/sign-in`)
    await signIn(page, env.base, env.apiKey)
    await page.goto(`${env.base}/console/log${query}`)
    await page.locator('#range').filter({ hasText: /of/ }).waitFor()
    return { context, page, problems }
  }
  const story = (page: Page) => page.getByRole('dialog')

  it('shows a message sent through the API within a second of a refresh, newest first', async () => {
    await send({ to: 'first@example.com', subject: 'older one' })
    const { context, page, problems } = await openLog()
    await send({ to: 'bob@example.com', subject: 'just sent' })
    await page.getByRole('button', { name: 'Refresh' }).click()
    await page.getByRole('button', { name: 'just sent' }).waitFor({ timeout: 1000 })
    const first = page.locator('#log tbody tr').first()
    expect(await first.locator('td').nth(1).textContent()).toBe('me@example.org')
    expect(await first.locator('td').nth(2).textContent()).toBe('bob@example.com')
    expect(await first.locator('td').nth(3).textContent()).toBe('just sent')
    await screenshot(page, 'log-refreshed')
    expect(problems()).toEqual([])
    await context.close()
  })

  it("opens a delivered message's story from its row, by keyboard: the attempt with the sink's reply; Escape closes it", async () => {
    const txid = await send({ to: 'carol@example.com', subject: 'story of a delivery' })
    await env.settled(txid)
    const { context, page, problems } = await openLog(`?mailid=${txid}`)
    const open = page.getByRole('button', { name: 'story of a delivery' })
    await open.focus()
    await page.keyboard.press('Enter')
    const dialog = story(page)
    await dialog.getByRole('heading', { name: 'story of a delivery' }).waitFor()
    const delivered = dialog.locator('.timeline li.delivered')
    await delivered.waitFor()
    expect(await dialog.locator('.badge.delivered').textContent()).toBe('Delivered')
    expect(await delivered.locator('.reply').textContent()).toMatch(/^250 .*Ok: queued as SINK\d+/)
    expect(await delivered.textContent()).toContain('127.0.0.1')
    expect(await dialog.textContent()).toContain(txid)
    expect(await dialog.locator('.timeline li.accepted').count()).toBe(1)
    // The page under it is still the log: it opened without leaving the page.
    expect(new URL(page.url()).pathname).toBe('/console/log')
    await screenshot(page, 'story-delivered', false)
    await page.keyboard.press('Escape')
    await dialog.waitFor({ state: 'hidden' })
    expect(await open.evaluate((el) => el === document.activeElement)).toBe(true)
    expect(problems()).toEqual([])
    await context.close()
  })

  it("shows a bounced recipient's story: the failure with the destination's answer, and the suppression", async () => {
    const txid = await send({ to: 'nobody@example.com', subject: 'story of a bounce' })
    await env.settled(txid)
    const { context, page, problems } = await openLog(`?mailid=${txid}`)
    await page.locator('#log tbody tr').filter({ hasText: 'nobody@example.com' }).click()
    const dialog = story(page)
    const failed = dialog.locator('.timeline li.failed')
    await failed.waitFor()
    expect(await dialog.locator('.badge.failed').textContent()).toBe('Failed')
    expect(await failed.locator('.reply').textContent()).toMatch(/^550 5\.1\.1 <nobody@example\.com>: .*User unknown/)
    expect(await dialog.locator('.timeline li.suppressed').count()).toBe(1)
    expect(await dialog.locator('.notice').textContent()).toMatch(
      /^Suppressed: this address is on the local block list/,
    )
    await screenshot(page, 'story-bounced', false)
    await dialog.getByRole('button', { name: 'Close the story' }).click()
    await dialog.waitFor({ state: 'hidden' })
    expect(problems()).toEqual([])
    await context.close()
  })

  it('shows what the API says as text, never as HTML: a subject that is markup stays markup', async () => {
    const subject = '<img src=x onerror="window.__pwned=1"><b>bold</b>'
    const txid = await send({ to: 'dave@example.com', subject })
    await env.settled(txid)
    const { context, page, problems } = await openLog(`?mailid=${txid}`)
    const cell = page.locator('#log tbody tr td').nth(3)
    await cell.getByRole('button').waitFor()
    expect(await cell.textContent()).toBe(subject)
    expect(await page.locator('#log img, #log b').count()).toBe(0)
    await cell.getByRole('button').click()
    await story(page).locator('.timeline li').first().waitFor()
    expect(await page.locator('#story-title').textContent()).toBe(subject)
    expect(await page.locator('#story img, #story b').count()).toBe(0)
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined()
    await screenshot(page, 'markup-as-text', false)
    expect(problems()).toEqual([])
    await context.close()
  })

  it("filters as viewMailLog does (dates in words as the API takes them), pages, and shows the API's refusals", async () => {
    const sent: string[] = []
    for (let i = 1; i <= 12; i++) sent.push(await send({ to: 'paged@example.com', subject: `page ${i}` }))
    await Promise.all(sent.map((txid) => env.settled(txid)))
    const { context, page, problems } = await openLog()
    const form = page.locator('#filters')
    const range = (text: string) =>
      page
        .locator('#range')
        .filter({ hasText: new RegExp(`^${text}$`) })
        .waitFor()
    const subjects = () => page.locator('#log tbody tr td:nth-child(4)').allTextContents()
    await form.getByLabel('Recipient').fill('paged@example.com')
    await form.getByLabel('From date').fill('today')
    await form.getByLabel('Rows').selectOption('10')
    // Enter in any field searches.
    await form.getByLabel('Subject').press('Enter')
    await range('1–10 of 12')
    expect(await subjects()).toEqual([12, 11, 10, 9, 8, 7, 6, 5, 4, 3].map((i) => `page ${i}`))
    // The filters are in the address (never the key), so that a search can be bookmarked.
    const address = new URL(page.url()).searchParams
    expect([address.get('to'), address.get('startDate'), address.get('limit')]).toEqual([
      'paged@example.com',
      'today',
      '10',
    ])
    expect(page.url()).not.toContain(env.apiKey)

    expect(await page.getByRole('button', { name: 'Newer' }).isDisabled()).toBe(true)
    await page.getByRole('button', { name: 'Older' }).click()
    await range('11–12 of 12')
    expect(await subjects()).toEqual(['page 2', 'page 1'])
    expect(await page.getByRole('button', { name: 'Older' }).isDisabled()).toBe(true)
    await page.getByRole('button', { name: 'Newer' }).click()
    await range('1–10 of 12')

    // All were delivered: none is left when asking for the others.
    await form.getByLabel('Delivery').selectOption('0')
    await form.getByRole('button', { name: 'Search' }).click()
    await range('0 of 0')
    expect(await page.locator('#log tbody').textContent()).toBe('No messages match.')

    await form.getByLabel('From date').fill('the day my cat learned SMTP')
    await form.getByRole('button', { name: 'Search' }).click()
    const alert = page.getByRole('alert').filter({ hasText: 'startDate' })
    await alert.waitFor()
    expect(await alert.textContent()).toBe('startDate: "the day my cat learned SMTP" is not a date or a Unix timestamp')
    await screenshot(page, 'log-refusal')
    expect(problems()).toEqual([])
    await context.close()
  })
})

import nodemailer from 'nodemailer'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type ConsoleEnv, describeChromium, newPage, screenshot, signIn, startConsole } from './browser.js'

const TRAP = 'trap@example.net'

// The Overview, Blocks, Rules and Orders pages in Chromium, each checked against the API.
describeChromium('console: overview, blocks, rules and orders', () => {
  let env: ConsoleEnv
  beforeAll(async () => {
    // The operator set a price: the Overview shows the cost.
    env = await startConsole([TRAP], { env: { MAILROOM_PRICE_PER_MESSAGE: '0.0002' } })
  })
  afterAll(() => env?.close())

  const send = (fields: Record<string, string>) => env.api('POST', '/mail/send', { body: 'x', ...fields })
  const open = async (path: string, options = {}, key = env.apiKey) => {
    const { context, page, problems } = await newPage(env, options)
    await page.goto(`${env.base}/console/sign-in`)
    await signIn(page, env.base, key)
    await page.goto(`${env.base}${path}`)
    return { context, page, problems }
  }

  it('Blocks: delisting asks first, and once confirmed removes the entry, and the block', async () => {
    // A hard bounce suppresses the address; the next message to it is refused and listed.
    const bounced = await send({ from: 'me@example.org', to: 'nobody@example.com', subject: 'first' })
    await env.settled(bounced.body.text)
    expect((await send({ from: 'me@example.org', to: 'nobody@example.com', subject: 'again' })).status).toBe(400)
    // Mail to a trap blocks its sender.
    await expect
      .poll(async () => (await send({ from: 'spammer@example.org', to: TRAP, subject: 'hi' })).body.message)
      .toMatch(/is a spam trap/)

    const { context, page, problems } = await open('/console/blocks')
    const local = page.locator('#local tbody tr').filter({ hasText: 'nobody@example.com' })
    await local.waitFor()
    expect(await local.locator('td').nth(3).textContent()).toBe('again')
    await page.locator('#mbtrap tbody tr').filter({ hasText: 'spammer@example.org' }).waitFor()
    await screenshot(page, 'blocks')

    const dialog = page.getByRole('dialog')
    await local.getByRole('button', { name: 'Delist nobody@example.com' }).click()
    expect(await dialog.locator('#confirm-text').textContent()).toBe(
      'Delist nobody@example.com? Mail to nobody@example.com will be accepted again, until it is blocked again.',
    )
    await screenshot(page, 'blocks-confirm')
    await dialog.getByRole('button', { name: 'Cancel' }).click()
    await dialog.waitFor({ state: 'hidden' })
    expect((await env.api('GET', '/mail/blocks')).body.local).toHaveLength(1)
    expect(await local.count()).toBe(1)

    await local.getByRole('button', { name: 'Delist nobody@example.com' }).click()
    await dialog.getByRole('button', { name: 'Delist' }).click()
    await page.getByRole('status').filter({ hasText: 'nobody@example.com was delisted.' }).waitFor()
    await page.locator('#local tbody').filter({ hasText: 'No mail was refused to suppressed recipients.' }).waitFor()
    expect((await env.api('GET', '/mail/blocks')).body.local).toEqual([])
    expect((await send({ from: 'me@example.org', to: 'nobody@example.com', subject: 'allowed' })).status).toBe(200)

    // By keyboard: the confirm button has the focus, Enter confirms.
    await page.getByRole('button', { name: 'Delist spammer@example.org' }).click()
    await page.keyboard.press('Enter')
    await page.locator('#mbtrap tbody').filter({ hasText: 'No mail went to spam traps.' }).waitFor()
    expect((await env.api('GET', '/mail/blocks')).body.mbtrap).toEqual([])
    expect((await send({ from: 'spammer@example.org', to: 'bob@example.com', subject: 'sorry' })).status).toBe(200)
    await screenshot(page, 'blocks-delisted')
    expect(problems()).toEqual([])
    await context.close()
  })

  it('Rules: adds a rule, shows what the API refuses and stores nothing then, and deletes a rule after asking', async () => {
    const { context, page, problems } = await open('/console/rules')
    const form = page.locator('#add-rule')
    await page.locator('#rules tbody').filter({ hasText: 'No rules' }).waitFor()
    await form.getByLabel('Type').selectOption('domain')
    await form.getByLabel('Value').fill('spam.example')
    await form.getByLabel('Value').press('Enter')
    const added = page.getByRole('status').filter({ hasText: /^Rule \d+ was added\.$/ })
    await added.waitFor()
    const id = /Rule (\d+)/.exec((await added.textContent())!)![1]
    const row = page.locator('#rules tbody tr').filter({ hasText: 'spam.example' })
    expect(await row.locator('td').allTextContents()).toEqual([
      id,
      'mb1',
      'Sender domain',
      'spam.example',
      expect.any(String),
      'Delete',
    ])
    expect((await env.api('GET', '/mail/rules')).body).toMatchObject([{ id, type: 'domain', data: 'spam.example' }])
    expect((await send({ from: 'x@spam.example', to: 'bob@example.com', subject: 'ruled' })).status).toBe(400)

    await form.getByLabel('Type').selectOption('email')
    await form.getByLabel('Value').fill('not an address')
    await form.getByRole('button', { name: 'Add rule' }).click()
    const alert = page.getByRole('alert').filter({ hasText: 'data:' })
    await alert.waitFor()
    expect(await alert.textContent()).toBe('data: "not an address" is not a full email address (type email)')
    expect((await env.api('GET', '/mail/rules')).body).toHaveLength(1)
    await screenshot(page, 'rules')

    await page.getByRole('button', { name: `Delete rule ${id}` }).click()
    const dialog = page.getByRole('dialog')
    expect(await dialog.locator('#confirm-text').textContent()).toBe(
      `Delete rule ${id} (Sender domain spam.example)? Mail it refused is accepted again.`,
    )
    await dialog.getByRole('button', { name: 'Delete' }).click()
    await page
      .getByRole('status')
      .filter({ hasText: `Rule ${id} was deleted.` })
      .waitFor()
    await page.locator('#rules tbody').filter({ hasText: 'No rules' }).waitFor()
    expect((await env.api('GET', '/mail/rules')).body).toEqual([])
    expect((await send({ from: 'x@spam.example', to: 'bob@example.com', subject: 'free' })).status).toBe(200)
    expect(problems()).toEqual([])
    await context.close()
  })

  it('Orders: the SMTP settings a mail program needs, the password on request, copy buttons; they work', async () => {
    const { context, page, problems } = await open('/console/orders', {
      permissions: ['clipboard-read', 'clipboard-write'],
    })
    await page.getByRole('button', { name: 'Show password of mb1' }).waitFor()
    expect(await page.locator('#smtp-host').textContent()).toBe('127.0.0.1')
    expect(await page.locator('#smtp-port').textContent()).toBe(String(env.server.smtpPort))
    expect(await page.locator('#smtp-secure-port').textContent()).toBe(String(env.server.smtpsPort))
    // The password is fetched only when asked for.
    expect(await page.content()).not.toContain(env.smtp.pass)
    await page.getByRole('button', { name: 'Show password of mb1' }).click()
    const password = page.locator('#password-1')
    await password.waitFor()
    expect(await password.textContent()).toBe(env.smtp.pass)
    await screenshot(page, 'orders')

    const copied = async (button: string) => {
      await page.getByRole('button', { name: button }).click()
      await page.getByRole('status').filter({ hasText: 'Copied.' }).waitFor()
      return page.evaluate(() => navigator.clipboard.readText())
    }
    const settings = {
      host: await copied('Copy the host'),
      port: Number(await copied('Copy the STARTTLS port')),
      user: await copied('Copy the username of mb1'),
      pass: await copied('Copy the password of mb1'),
    }
    await page.getByRole('button', { name: 'Hide' }).click()
    expect(await page.content()).not.toContain(env.smtp.pass)

    // What was copied is what a mail program needs to send.
    const transport = nodemailer.createTransport({
      host: settings.host,
      port: settings.port,
      requireTLS: true,
      auth: { user: settings.user, pass: settings.pass },
      tls: { rejectUnauthorized: false },
    })
    const info = await transport.sendMail({
      from: 'me@example.org',
      to: 'bob@example.com',
      subject: 'copied',
      text: 'x',
    })
    transport.close()
    expect(info.accepted).toEqual(['bob@example.com'])
    expect(problems()).toEqual([])
    await context.close()
  })

  it("Orders with a sandbox key: a real order's password is withheld, with the reason, nothing to copy", async () => {
    const { context, page, problems } = await open('/console/orders', {}, env.sandboxKey)
    await page.getByRole('button', { name: 'Show password of mb1' }).click()
    const withheld = page.locator('#password-1')
    await withheld.waitFor()
    expect(await withheld.textContent()).toMatch(
      /^Withheld: the password sends real mail, and this caller is a sandbox key/,
    )
    expect(await page.content()).not.toContain(env.smtp.pass)
    expect(await page.getByRole('button', { name: 'Copy the password of mb1' }).count()).toBe(0)
    expect(problems()).toEqual([])
    await context.close()
  })

  it("Overview: this billing cycle's usage and cost, volume over time by outcome, the top destinations and senders", async () => {
    for (const to of ['top@example.com', 'top@example.com', 'top@example.com', 'second@example.com'])
      expect((await send({ from: 'ranked@example.org', to, subject: 'ranked' })).status).toBe(200)
    const stats = (await env.api('GET', '/mail/stats?time=billing')).body
    const { context, page, problems } = await open('/console')
    await page.locator('#top-to li').first().waitFor()
    expect(await page.locator('#usage').textContent()).toBe(String(stats.usage))
    expect(await page.locator('#cost').textContent()).toBe(
      new Intl.NumberFormat('en', { style: 'currency', currency: stats.currency }).format(stats.cost),
    )
    const entry = (list: string, name: string) =>
      page.locator(`${list} li`).filter({ has: page.locator('.name', { hasText: new RegExp(`^${name}$`) }) })
    expect(await entry('#top-to', 'top@example.com').locator('.count').textContent()).toBe(
      String(stats.volume.to['top@example.com']),
    )
    expect(await entry('#top-from', 'ranked@example.org').locator('.count').textContent()).toBe('4')
    // Ranked: the most first.
    const counts = (await page.locator('#top-to .count').allTextContents()).map(Number)
    expect(counts).toEqual([...counts].sort((a, b) => b - a))

    // Volume over time, stacked by outcome: the API's numbers, drawn and as a table.
    const volume = async (query: string) => (await env.api('GET', `/mail/volume?${query}`)).body
    const days = await volume('interval=day')
    const chart = page.locator('#volume-chart')
    const legend = await chart.locator('.legend li').allTextContents()
    expect(legend).toEqual([
      `Accepted ${days.totals.accepted}`,
      `Delivered ${days.totals.delivered}`,
      `Deferred ${days.totals.deferred}`,
      `Failed ${days.totals.failed}`,
      `Refused ${days.totals.refused}`,
    ])
    expect(days.totals.delivered * days.totals.failed * days.totals.refused).toBeGreaterThan(0)
    const today = days.buckets.at(-1)
    for (const outcome of ['delivered', 'failed', 'refused'])
      expect(await chart.locator(`svg rect.${outcome}`).count(), outcome).toBe(today[outcome] > 0 ? 1 : 0)
    expect(await chart.locator('table tbody tr').count()).toBe(days.buckets.length)
    await page.locator('#volume-form').getByLabel('Interval').selectOption('hour')
    await page.locator('#volume-form').getByLabel('From').fill('3 hours ago')
    await page.locator('#volume-form').getByLabel('From').press('Enter')
    await page
      .locator('#volume-caption')
      .filter({ hasText: /^By hour/ })
      .waitFor()
    const hours = await volume('interval=hour&startTime=3%20hours%20ago')
    expect(await chart.locator('table tbody tr').count()).toBe(hours.buckets.length)
    expect(await chart.locator('svg').getAttribute('aria-label')).toBe(
      `Volume over ${hours.buckets.length} intervals: ${hours.totals.delivered} delivered, ${hours.totals.deferred} deferred, ${hours.totals.failed} failed, ${hours.totals.refused} refused`,
    )

    await page.locator('#top-form').getByLabel('Window').selectOption('1h')
    await page.locator('#top-form').getByRole('button', { name: 'Show' }).click()
    const hour = (await env.api('GET', '/mail/stats?time=1h')).body
    await page
      .locator('#top-summary')
      .filter({ hasText: `${hour.received} messages received` })
      .waitFor()
    await screenshot(page, 'overview')
    expect(problems()).toEqual([])
    await context.close()
  })
})

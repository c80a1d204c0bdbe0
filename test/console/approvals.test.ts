import type { Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { DEFAULT_POLICY } from '../../storage/store.js'
import { expectAccessible } from './axe.js'
import { type ConsoleEnv, describeChromium, newPage, screenshot, startConsole } from './browser.js'

// A person decides a held message from its approvalUrl, by keyboard alone: sign in, read the
// message's text, Approve, confirm; the message is then delivered.
describeChromium('console: approvals', () => {
  let env: ConsoleEnv
  let txid: string
  let approvalUrl: string
  beforeAll(async () => {
    let agentKey = ''
    env = await startConsole([], {
      setup: async (admin) => {
        // The agent's key: every send it makes waits for a person.
        const { info, key } = await admin.store.apiKeys.create(1, Date.now())
        await admin.store.policies.set({ kind: 'key', id: info.id }, { ...DEFAULT_POLICY, approval: 'always' })
        agentKey = key
      },
    })
    const sent = await env.api(
      'POST',
      '/mail/send',
      {
        from: 'agent@example.org',
        to: 'bob@example.com',
        subject: 'Quarterly numbers',
        body: 'Hello Bob,\nthe numbers are attached.',
      },
      agentKey,
    )
    expect(sent).toMatchObject({ status: 200, body: { status: 'held' } })
    ;({ text: txid, approvalUrl } = sent.body)
  })
  afterAll(() => env?.close())

  /** Presses Tab until `focused` says the focus is where it should be: reachable by keyboard. */
  const tabTo = async (page: Page, what: string, focused: () => boolean) => {
    for (let i = 0; i < 80; i++) {
      await page.keyboard.press('Tab')
      if (await page.evaluate(focused)) return
    }
    throw new Error(`${what} is not reachable by Tab`)
  }

  it('from its approvalUrl, by keyboard: sign in, read its text, Approve, confirm; it is delivered', async () => {
    const { pathname, search } = new URL(approvalUrl)
    expect(`${pathname}${search}`).toBe(`/console/approvals?id=${txid}`)
    const url = `${env.base}${pathname}${search}`
    const { context, page, problems } = await newPage(env)
    await page.goto(url)
    // Not signed in: the sign-in page, which then comes back here.
    await page.waitForURL(`${env.base}/console/sign-in`)
    await tabTo(page, 'the API key field', () => document.activeElement?.id === 'f-key')
    await page.keyboard.type(env.apiKey)
    await page.keyboard.press('Enter')
    await page.waitForURL(url)

    // The message as text, never as HTML.
    const held = page.getByRole('region', { name: 'Held message' })
    await held.getByText('Quarterly numbers').waitFor()
    expect(await held.locator('pre').textContent()).toMatch(/^Hello Bob,\r?\nthe numbers are attached\./)
    expect(await held.locator('iframe').count()).toBe(0)
    expect(await held.textContent()).toMatch(/every send of API key \d+ needs approval/)
    await screenshot(page, 'approval')
    await expectAccessible(page, 'a held message')

    await tabTo(
      page,
      'Approve',
      () => document.activeElement?.closest('#held') !== null && document.activeElement?.textContent === 'Approve',
    )
    await page.keyboard.press('Enter')
    const dialog = page.getByRole('dialog')
    await dialog.waitFor()
    expect(await dialog.textContent()).toContain('Approve the message to bob@example.com? It is sent at once.')
    // The dialog's own button has the focus: Enter confirms.
    await page.keyboard.press('Enter')
    await page
      .getByRole('status')
      .filter({ hasText: `Message ${txid} was approved: it is queued for delivery.` })
      .waitFor()

    await expect.poll(() => env.sink.messages.length, { timeout: 15_000 }).toBe(1)
    expect(env.sink.messages[0].to).toEqual(['bob@example.com'])
    expect(env.sink.messages[0].raw.toString()).toContain('Subject: Quarterly numbers')
    expect((await env.api('GET', '/mail/approvals?status=all')).body.approvals).toMatchObject([
      { id: txid, status: 'approved', decidedBy: 'API key 1 (console or API)' },
    ])
    // Nothing waits any more.
    await page.getByText('No message is waiting for approval.').waitFor()
    expect(problems()).toEqual([])
    await context.close()
  })
})

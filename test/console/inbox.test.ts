import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateDkimKey } from '../../relay/dkim.js'
import { openRuntime, type Runtime } from '../../runtime.js'
import { silentLogger } from '../helpers.js'
import { FORGED, receive, receiving } from './inbound.js'
import {
  type ConsoleEnv,
  describeChromium,
  loaded,
  newPage,
  screenshot,
  signIn,
  startConsole,
  VIEWPORTS,
} from './browser.js'

/** The receiving domain of these tests. */
const DOMAIN = 'in.example'

// The Inbox page in Chromium at a laptop's and a phone's width: inboxes added and removed through
// the page, received mail (seeded through the store, as the MX door stores it) listed, read with
// its verdict, content, attachments and conversation, and marked read; each checked against the API.
describeChromium('console: the Inbox page', () => {
  let env: ConsoleEnv
  let admin: Runtime
  // Where the hostile message's script and image would call: nothing may reach it.
  const probe = { hits: [] as string[], url: '' }
  const probeServer = createServer((req, res) => {
    probe.hits.push(req.url ?? '')
    res.end()
  })
  beforeAll(async () => {
    env = await startConsole()
    admin = await openRuntime(env.config, { logger: silentLogger })
    await admin.store.domains.addKey({
      domain: DOMAIN,
      accountId: 1,
      selector: 's1',
      algorithm: 'ed25519',
      ...generateDkimKey('ed25519'),
      now: Date.now(),
    })
    await receiving(admin, DOMAIN)
    await new Promise<void>((resolve) => probeServer.listen(0, '127.0.0.1', resolve))
    probe.url = `http://127.0.0.1:${(probeServer.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    await admin?.close()
    await env?.close()
    probeServer.close()
  })

  describe.each(VIEWPORTS)('at $name', ({ viewport, isMobile }) => {
    const inbox = `agent-${viewport.width}@${DOMAIN}`
    const open = async (path: string) => {
      const session = await newPage(env, { viewport, isMobile })
      await signIn(session.page, env.base, env.apiKey)
      await session.page.goto(`${env.base}${path}`)
      await loaded(session.page)
      return session
    }
    const shot = (page: Page, what: string, fullPage = true) => screenshot(page, `${what}-${viewport.width}`, fullPage)
    /** Presses Tab until the focus is on the control named `name`: reachable by keyboard. */
    const tabTo = async (page: Page, name: string) => {
      for (let i = 0; i < 80; i++) {
        await page.keyboard.press('Tab')
        const focused = await page.evaluate(
          () => document.activeElement?.getAttribute('aria-label') ?? document.activeElement?.textContent ?? '',
        )
        if (focused === name) return
      }
      throw new Error(`${name} is not reachable by Tab`)
    }

    it('Inboxes: adds one, shows what the API refuses and adds nothing then, deletes one after asking', async () => {
      const { context, page, problems } = await open('/console/inbox')
      const form = page.locator('#add-inbox')
      await form.getByLabel('Address').fill(inbox)
      await form.getByRole('button', { name: 'Add inbox' }).click()
      await page
        .getByRole('status')
        .filter({ hasText: `Inbox ${inbox} was added.` })
        .waitFor()
      await page.locator('#inboxes tbody tr').filter({ hasText: inbox }).waitFor()
      const made = (await env.api('GET', '/inboxes')).body.find((i: { address: string }) => i.address === inbox)
      expect(made).toMatchObject({ address: inbox, messages: 0, unread: 0 })

      const before = (await env.api('GET', '/inboxes')).body
      await form.getByLabel('Address').fill(`someone@elsewhere-${viewport.width}.example`)
      await form.getByLabel('Address').press('Enter')
      const alert = page.getByRole('alert').filter({ hasText: 'not a receiving domain' })
      await alert.waitFor()
      expect(await alert.textContent()).toBe(
        `elsewhere-${viewport.width}.example is not a receiving domain of this account`,
      )
      await form.getByLabel('Address').fill(inbox)
      await form.getByRole('button', { name: 'Add inbox' }).click()
      await page
        .getByRole('alert')
        .filter({ hasText: `${inbox} is an inbox already` })
        .waitFor()
      expect((await env.api('GET', '/inboxes')).body).toEqual(before)

      // A second inbox, removed: Cancel keeps it, Delete (by keyboard: the confirm button has the focus) removes it.
      const spare = `spare-${viewport.width}@${DOMAIN}`
      await form.getByLabel('Address').fill(spare)
      await form.getByRole('button', { name: 'Add inbox' }).click()
      const row = page.locator('#inboxes tbody tr').filter({ hasText: spare })
      await row.waitFor()
      await shot(page, 'inboxes')
      await row.getByRole('button', { name: `Delete inbox ${spare}` }).click()
      const dialog = page.getByRole('dialog')
      expect(await dialog.locator('#confirm-text').textContent()).toBe(
        `Delete inbox ${spare}? The address refuses mail from then on.`,
      )
      await dialog.getByRole('button', { name: 'Cancel' }).click()
      await dialog.waitFor({ state: 'hidden' })
      expect((await env.api('GET', '/inboxes')).body.map((i: { address: string }) => i.address)).toContain(spare)
      await row.getByRole('button', { name: `Delete inbox ${spare}` }).click()
      await dialog.waitFor()
      await page.keyboard.press('Enter')
      await page
        .getByRole('status')
        .filter({ hasText: `Inbox ${spare} was deleted.` })
        .waitFor()
      expect(await row.count()).toBe(0)
      expect((await env.api('GET', '/inboxes')).body.map((i: { address: string }) => i.address)).not.toContain(spare)
      expect(problems()).toEqual([])
      await context.close()
    })

    it('Messages: unread and verdict marked; a conversation read by keyboard, marked read; a forgery warned of', async () => {
      // The agent wrote first; the reply answers it, so both are one thread.
      const sent = await env.api('POST', '/mail/send', {
        from: inbox,
        to: 'alice@remote.example',
        subject: `Quote ${viewport.width}`,
        body: 'Our quote, attached.',
      })
      expect(sent.status).toBe(200)
      const { messageId } = (await env.api('GET', `/mail/log/${sent.body.text}`)).body
      const hostile =
        `<p>Thanks, <b>accepted</b></p><script>fetch('${probe.url}/script')</script>` +
        `<img src="${probe.url}/pixel" onerror="fetch('${probe.url}/onerror')" alt="logo">`
      const reply = await receive(admin, inbox, {
        from: { address: 'alice@remote.example', name: 'Alice' },
        subject: `Re: Quote ${viewport.width}`,
        inReplyTo: messageId.replace(/^<|>$/g, ''),
        text: 'Thanks, accepted\n\n> Our quote, attached.',
        html: hostile,
        extractedText: 'Thanks, accepted',
        attachments: [{ index: 0, filename: 'order.pdf', contentType: 'application/pdf', size: 2048 }],
      })
      const forged = await receive(
        admin,
        inbox,
        {
          from: { address: 'ceo@bank.example', name: '' },
          subject: `Urgent ${viewport.width}`,
          text: 'Pay now.',
        },
        FORGED,
      )

      const { context, page, problems } = await open('/console/inbox')
      await page.locator('#f-inbox').selectOption(inbox)
      await page.locator('#inbound-filters').getByRole('button', { name: 'Show' }).click()
      const rowOf = (subject: string) => page.locator('#inbound tbody tr').filter({ hasText: subject })
      await rowOf(`Urgent ${viewport.width}`).locator('.auth .badge').waitFor()
      await rowOf(`Re: Quote ${viewport.width}`).locator('.auth .badge').waitFor()
      expect(await page.locator('#inbound tbody tr td:nth-child(4)').allTextContents()).toEqual([
        `Urgent ${viewport.width}`,
        `Re: Quote ${viewport.width}`,
      ])
      expect(await rowOf(`Urgent ${viewport.width}`).locator('.badge').allTextContents()).toEqual([
        'Unread',
        'Failed checks',
      ])
      expect(await rowOf(`Re: Quote ${viewport.width}`).locator('.badge').allTextContents()).toEqual([
        'Unread',
        'Authenticated',
      ])
      expect(await page.locator('#inbound-range').textContent()).toBe('1–2 of 2')
      await shot(page, 'inbox')

      // By keyboard: Tab to the message, Enter opens it.
      await tabTo(page, `Re: Quote ${viewport.width}`)
      await page.keyboard.press('Enter')
      const dialog = page.locator('#message')
      await dialog.getByRole('heading', { name: `Re: Quote ${viewport.width}` }).waitFor()
      await dialog.locator('.conversation li').nth(1).waitFor()
      expect(await dialog.locator('.verdict').textContent()).toBe(
        "Authenticated Signed by remote.example (DKIM pass); sender's server allowed (SPF pass); DMARC pass.",
      )
      expect(await dialog.locator('.warnings').count()).toBe(0)
      expect(await dialog.locator('.attachments li').allTextContents()).toEqual([
        'order.pdf application/pdf, 2,048 bytes',
      ])
      // The conversation in order: what the agent sent, then the reply (this message).
      expect(await dialog.locator('.conversation li').allInnerTexts()).toEqual([
        expect.stringMatching(new RegExp(`Sent by ${inbox} to alice@remote.example: Quote ${viewport.width}$`)),
        expect.stringMatching(
          new RegExp(`Received from Alice <alice@remote.example>: Re: Quote ${viewport.width} \\(this message\\)$`),
        ),
      ])
      const thread = (await env.api('GET', `/threads/${reply.threadId}`)).body
      expect(thread.messages.map((m: { direction: string }) => m.direction)).toEqual(['sent', 'received'])
      expect(await dialog.getByRole('link', { name: `Quote ${viewport.width}` }).getAttribute('href')).toBe(
        `/console/log?mailid=${sent.body.text}&story=${sent.body.text}`,
      )

      // The HTML, sanitized in a sandboxed frame where nothing runs or loads, as the log's story shows it.
      const frame = dialog.locator('iframe.html')
      await frame.waitFor()
      expect(await frame.getAttribute('sandbox')).toBe('')
      const srcdoc = (await frame.getAttribute('srcdoc'))!
      expect(srcdoc).toContain(`content="default-src 'none'"`)
      for (const gone of ['<script', 'onerror', probe.url]) expect(srcdoc).not.toContain(gone)
      await page.frameLocator('iframe.html').getByText('Thanks, accepted').waitFor()
      await dialog.getByRole('button', { name: 'Text', exact: true }).click()
      expect(await page.getByLabel('The message as text').textContent()).toBe(
        'Thanks, accepted\n\n> Our quote, attached.',
      )
      expect(probe.hits).toEqual([])
      await shot(page, 'inbox-message', false)

      // Opened is read: in the API, in its row, and in the inbox's count.
      await expect
        .poll(async () => (await env.api('GET', `/inbound/${reply.id}`)).body.read, { timeout: 5000 })
        .toBe(true)
      expect((await env.api('GET', `/inbound/${forged.id}`)).body.read).toBe(false)
      await page.keyboard.press('Escape')
      await dialog.waitFor({ state: 'hidden' })
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe(`Re: Quote ${viewport.width}`)
      expect(await rowOf(`Re: Quote ${viewport.width}`).locator('.badge').allTextContents()).toEqual(['Authenticated'])
      await page
        .locator('#inboxes tbody tr')
        .filter({ hasText: inbox })
        .locator('td:nth-child(3)')
        .filter({ hasText: /^1$/ })
        .waitFor()

      // The forgery: a verdict of failures, each a warning.
      await rowOf(`Urgent ${viewport.width}`)
        .getByRole('button', { name: `Urgent ${viewport.width}` })
        .click()
      await dialog.getByRole('heading', { name: `Urgent ${viewport.width}` }).waitFor()
      await dialog.locator('.verdict').waitFor()
      expect(await dialog.locator('.verdict').textContent()).toBe('Failed checks It failed the checks below.')
      expect(await dialog.locator('.warnings li').allTextContents()).toEqual([
        'Warning: A signature of bank.example does not verify: the message was altered or forged (DKIM fail)',
        "Warning: sender's server not allowed to send for bank.example (SPF fail)",
        'Warning: fails the DMARC policy of bank.example: the From address may be forged (DMARC fail)',
      ])
      // A message without HTML shows its text; it has no attachments, and a conversation of one.
      expect(await page.getByLabel('The message as text').textContent()).toBe('Pay now.')
      expect(await dialog.locator('.attachments').count()).toBe(0)
      expect(await dialog.getByRole('heading', { name: 'Conversation (1 message)' }).count()).toBe(1)
      await shot(page, 'inbox-forged', false)
      await dialog.getByRole('button', { name: 'Close the message' }).click()

      // Unread only: none left once both were opened.
      await expect
        .poll(async () => (await env.api('GET', `/inbound/${forged.id}`)).body.read, { timeout: 5000 })
        .toBe(true)
      await page.locator('#f-unread').check()
      await page.locator('#inbound-filters').getByRole('button', { name: 'Show' }).click()
      await page.locator('#inbound tbody').filter({ hasText: 'No unread messages.' }).waitFor()
      expect(problems().filter((p) => !/violates .* The action has been blocked\.$/.test(p))).toEqual([])
      await context.close()
    })
  })
})

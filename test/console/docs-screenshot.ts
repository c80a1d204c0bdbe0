// Takes docs/console.png, the README's picture of the console: `mailroom serve` as built with a
// little realistic mail (delivered, bounced, deferred), the Log page with the story of a deferred message open.
// Run after `npm run build`: npx tsx test/console/docs-screenshot.ts
import { rmSync } from 'node:fs'
import { startTestServer } from '../helpers.js'
import { startSink } from '../relay/sink.js'
import { launchChromium } from '../system/chromium.js'

const OUT = new URL('../../docs/console.png', import.meta.url).pathname

const sink = await startSink()
sink.state.rcptRule = (rcpt) =>
  rcpt.startsWith('old.address@')
    ? { code: 550, message: `5.1.1 <${rcpt}>: Recipient address rejected: User unknown in virtual mailbox table` }
    : rcpt.endsWith('@busy.example')
      ? { code: 451, message: '4.7.1 Greylisted, please try again in 300 seconds' }
      : undefined
const { server, dataDir, apiKey } = await startTestServer('mailroom-docs-', {
  MAILROOM_SMARTHOST: `127.0.0.1:${sink.port}`,
})
const base = `http://127.0.0.1:${server.httpPort}`
const send = async (from: string, to: string, subject: string) => {
  const res = await fetch(`${base}/mail/send`, {
    method: 'POST',
    headers: { 'X-API-KEY': apiKey, 'Content-Type': 'application/json' },
    body: JSON.stringify({ from, to, subject, body: `<p>${subject}</p>` }),
  })
  return ((await res.json()) as { text: string }).text
}

try {
  const mail: [string, string, string][] = [
    ['billing@shop.example', 'old.address@customer.example', 'Your invoice #20431'],
    ['alerts@monitor.example', 'ops@busy.example', 'Disk usage above 90% on db-2'],
    ['news@shop.example', 'ann@customer.example', 'Spring collection: 20% off this week'],
    ['billing@shop.example', 'li.wei@customer.example', 'Your invoice #20432'],
    ['support@shop.example', 'marco@customer.example', 'Re: order 88-1207 arrived damaged'],
    ['noreply@shop.example', 'sara@customer.example', 'Reset your password'],
  ]
  for (const [from, to, subject] of mail) await send(from, to, subject)
  await new Promise((resolve) => setTimeout(resolve, 2000))

  const browser = await launchChromium()
  const page = await browser.newPage({ viewport: { width: 1152, height: 640 } })
  await page.goto(`${base}/console/sign-in`)
  await page.getByLabel('API key').fill(apiKey)
  await page.getByLabel('API key').press('Enter')
  await page.waitForURL(`${base}/console`)
  await page.goto(`${base}/console/log`)
  await page.getByRole('button', { name: /^Disk usage/ }).click()
  await page.locator('#story .timeline li.deferred').waitFor()
  await page.screenshot({ path: OUT })
  await browser.close()
  console.log(`wrote ${OUT}`)
} finally {
  await server.stop()
  await sink.close()
  rmSync(dataDir, { recursive: true, force: true })
}

import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { getMessageContent } from '../../tools/get-message-content.js'
import { sendMail } from '../../tools/send-mail.js'
import { call, createTestEnv, type TestEnv } from '../helpers.js'
import { expectRefused, expectSchemaRefusal, run, storedRaw } from './support.js'

describe('getMessageContent', () => {
  let env: TestEnv
  beforeEach(async () => (env = await createTestEnv()))
  afterEach(() => env.close())

  const send = async (body: string) =>
    (await run(sendMail, { from: 'me@example.org', to: 'bob@example.com', subject: 'hi', body }, env.ctx)).text

  it('returns the text, the HTML as sent and the raw source while a recipient waits', async () => {
    const txid = await send('<p>Hello <img src=x onerror="alert(1)"></p>')
    const content = await run(getMessageContent, { id: txid.toUpperCase() }, env.ctx)
    expect(content).toEqual({
      id: txid,
      text: expect.stringMatching(/^Hello/),
      html: '<p>Hello <img src=x onerror="alert(1)"></p>',
      raw: storedRaw(env, txid).toString('utf8'),
    })
    const res = await call(env, 'GET', `/mail/log/${txid}/content`)
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual(content)
  })

  it('says when the body is no longer kept, and answers another account as if there were no message', async () => {
    const txid = await send('bye')
    const other = await env.newAccount()
    await expectRefused(run(getMessageContent, { id: txid }, other.ctx), 404, `id: message ${txid} not found`)
    await env.services.store.queue.cancel({ txid, now: env.clock(), leaseMs: 60_000, response: 'canceled' })
    await expectRefused(
      run(getMessageContent, { id: txid }, env.ctx),
      404,
      `id: the content of message ${txid} is no longer kept: a body is dropped once every recipient is delivered or failed`,
    )
    expectSchemaRefusal(getMessageContent, { id: 'nope' }, 'id')
  })
})

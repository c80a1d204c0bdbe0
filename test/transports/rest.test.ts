import { describe, expect, it } from 'vitest'
import { call, createTestEnv } from '../helpers.js'
import { upstreamErrors } from '../openapi.js'

describe('probe', () => {
  it('probes', async () => {
    const env = await createTestEnv({ MAILROOM_HTTP_BODY_LIMIT: '1kb' })
    const show = async (label: string, res: Response) => { const t = await res.text(); console.log(label, res.status, res.headers.get('content-type'), t.slice(0, 300)) ; return t}
    await show('ping', await env.app.request('/ping'))
    await show('pingjson', await env.app.request('/ping', { headers: { accept: 'application/json' } }))
    await show('413', await call(env, 'POST', '/mail/send', { to: 'a@example.com', from: 'b@example.com', subject: 's', body: 'x'.repeat(2000) }))
    await show('415', await call(env, 'POST', '/mail/send', 'a,b', { contentType: 'text/csv' }))
    await show('badjson', await call(env, 'POST', '/mail/send', '{"to":', { contentType: 'application/json' }))
    await show('log', await call(env, 'GET', '/mail/log?limit=0'))
    await show('log2', await call(env, 'GET', '/mail/log?delivered=0&limit=5&startDate=1700000000'))
    await show('log3', await call(env, 'GET', '/mail/log?startDate=yesterday'))
    await show('log4', await call(env, 'GET', '/mail/log?startDate=garbage'))
    await show('id', await call(env, 'GET', '/mail/abc'))
    await show('id', await call(env, 'GET', `/mail/${env.orderId}`))
    const r = await call(env, 'POST', '/mail/rules', { type: 'email', data: 'x@example.com' })
    await show('rule', r)
    const rr = await show('rules', await call(env, 'GET', '/mail/rules'))
    console.log(await upstreamErrors('getRules', 200, JSON.parse(rr)))
    console.log(await upstreamErrors('sendMail', 200, { status: 'ok' }))
    console.log(await upstreamErrors('viewMailLog', 404, { code: 404 }))
    console.log(await upstreamErrors('viewMailLog', 404, { code: 404, message: 'x' }))
    console.log(await upstreamErrors('pingServer', 200, 'Server is up and running'))
    console.log(await upstreamErrors('pingServer', 200, 5))
    console.log(await upstreamErrors('delistBlock', 400, { code: 'x', message: 'x' }))
    console.log(await upstreamErrors('getMailBlocks', 200, { local: [{date: '2020-13-01', from: 'a', subject: 's', to: 'x'}], mbtrap: [], subject: [] }))
    console.log(await upstreamErrors('getMailOrders', 200, [{id: 1, status: 'x', username: 'mb1'}]))
    await env.close()
  })
})

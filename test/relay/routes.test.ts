import { describe, expect, it } from 'vitest'
import { resolveRoute } from '../../relay/routes.js'
import { stubResolver } from './sink.js'

const OPTS = { mxPort: 2525, smarthost: null }

describe('routes', () => {
  const resolver = stubResolver({
    mx: {
      'two.test': [
        { exchange: 'mx2.two.test', priority: 20 },
        { exchange: 'mx1.two.test', priority: 10 },
      ],
      'null.test': [{ exchange: '', priority: 0 }],
      'dangling.test': [{ exchange: 'nowhere.test', priority: 10 }],
    },
    a: {
      'mx1.two.test': ['127.0.0.1'],
      'mx2.two.test': ['127.0.0.2'],
      'implicit.test': ['127.0.0.3'],
      'relay.test': ['127.0.0.4'],
    },
  })

  it('orders MX hosts by preference', async () => {
    expect(await resolveRoute(resolver, 'two.test', OPTS)).toEqual({
      hosts: [
        { name: 'mx1.two.test', addresses: ['127.0.0.1'], port: 2525 },
        { name: 'mx2.two.test', addresses: ['127.0.0.2'], port: 2525 },
      ],
    })
  })

  it('uses the A record when there is no MX (implicit MX)', async () => {
    expect(await resolveRoute(resolver, 'implicit.test', OPTS)).toEqual({
      hosts: [{ name: 'implicit.test', addresses: ['127.0.0.3'], port: 2525 }],
    })
  })

  it('fails permanently on a null MX', async () => {
    expect(await resolveRoute(resolver, 'null.test', OPTS)).toEqual({
      error: { code: 556, response: expect.stringContaining('null MX'), permanent: true },
    })
  })

  it('fails permanently for a domain with neither MX nor address', async () => {
    expect(await resolveRoute(resolver, 'nothing.test', OPTS)).toMatchObject({ error: { code: 550, permanent: true } })
  })

  it('defers when the MX hosts have no address, or DNS fails', async () => {
    expect(await resolveRoute(resolver, 'dangling.test', OPTS)).toMatchObject({
      error: { code: 451, permanent: false },
    })
    const broken = {
      ...resolver,
      resolveMx: async () => Promise.reject(Object.assign(new Error('timeout'), { code: 'ETIMEOUT' })),
    }
    expect(await resolveRoute(broken, 'two.test', OPTS)).toMatchObject({ error: { code: 451, permanent: false } })
  })

  it('sends everything to the smarthost when one is set', async () => {
    expect(
      await resolveRoute(resolver, 'two.test', { mxPort: 25, smarthost: { host: 'relay.test', port: 587 } }),
    ).toEqual({
      hosts: [{ name: 'relay.test', addresses: ['127.0.0.4'], port: 587 }],
    })
    expect(
      await resolveRoute(resolver, 'x.test', { mxPort: 25, smarthost: { host: '127.0.0.9', port: 2526 } }),
    ).toEqual({
      hosts: [{ name: '127.0.0.9', addresses: ['127.0.0.9'], port: 2526 }],
    })
  })
})

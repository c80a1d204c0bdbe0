import { describe, expect, it } from 'vitest'
import { nonPublicKind, resolveRoute } from '../../relay/routes.js'
import { stubResolver } from './sink.js'

// The zone below answers loopback addresses, where the tests' sinks listen.
const OPTS = { mxPort: 2525, smarthost: null, allowPrivateMx: true }
const PUBLIC_ONLY = { ...OPTS, allowPrivateMx: false }

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
      await resolveRoute(resolver, 'two.test', {
        mxPort: 25,
        smarthost: { host: 'relay.test', port: 587 },
        allowPrivateMx: false,
      }),
    ).toEqual({
      hosts: [{ name: 'relay.test', addresses: ['127.0.0.4'], port: 587 }],
    })
    expect(
      await resolveRoute(resolver, 'x.test', {
        mxPort: 25,
        smarthost: { host: '127.0.0.9', port: 2526 },
        allowPrivateMx: false,
      }),
    ).toEqual({
      hosts: [{ name: '127.0.0.9', addresses: ['127.0.0.9'], port: 2526 }],
    })
  })

  describe('MX hosts at addresses that are not public', () => {
    const zone = stubResolver({
      mx: {
        'inside.test': [{ exchange: 'mx.inside.test', priority: 10 }],
        'mixed.test': [
          { exchange: 'mx1.mixed.test', priority: 10 },
          { exchange: 'mx2.mixed.test', priority: 20 },
          { exchange: 'mx3.mixed.test', priority: 30 },
        ],
        'twice.test': [
          { exchange: 'mx1.twice.test', priority: 10 },
          { exchange: 'mx2.twice.test', priority: 20 },
        ],
      },
      a: {
        'mx.inside.test': ['127.0.0.1'],
        'mx1.mixed.test': ['10.0.0.5'],
        'mx2.mixed.test': ['192.168.1.2', '93.184.215.14'],
        'mx3.mixed.test': ['93.184.215.15'],
        'mx1.twice.test': ['10.0.0.5', '169.254.0.1'],
        'mx2.twice.test': ['100.64.0.1'],
        'implicit.test': ['::ffff:127.0.0.1'],
      },
    })

    it('fails the recipient at once, naming the address and its kind', async () => {
      expect(await resolveRoute(zone, 'inside.test', PUBLIC_ONLY)).toEqual({
        error: {
          code: 556,
          response: '5.4.4 mx.inside.test resolves only to 127.0.0.1, a loopback address: not delivered',
          permanent: true,
        },
      })
      expect(await resolveRoute(zone, 'twice.test', PUBLIC_ONLY)).toEqual({
        error: {
          code: 556,
          response:
            '5.4.4 mx1.twice.test resolves only to 10.0.0.5, a private address and 169.254.0.1, a link-local address; ' +
            'mx2.twice.test resolves only to 100.64.0.1, a carrier-grade NAT address: not delivered',
          permanent: true,
        },
      })
    })

    it("refuses an implicit MX (the domain's own address) the same way", async () => {
      expect(await resolveRoute(zone, 'implicit.test', PUBLIC_ONLY)).toMatchObject({
        error: {
          code: 556,
          response: expect.stringContaining('implicit.test resolves only to ::ffff:127.0.0.1, a loopback'),
          permanent: true,
        },
      })
    })

    it('skips the private hosts and addresses, and tries the others in order', async () => {
      expect(await resolveRoute(zone, 'mixed.test', PUBLIC_ONLY)).toEqual({
        hosts: [
          { name: 'mx2.mixed.test', addresses: ['93.184.215.14'], port: 2525 },
          { name: 'mx3.mixed.test', addresses: ['93.184.215.15'], port: 2525 },
        ],
      })
    })

    it('allows them with MAILROOM_ALLOW_PRIVATE_MX=true', async () => {
      expect(await resolveRoute(zone, 'inside.test', OPTS)).toEqual({
        hosts: [{ name: 'mx.inside.test', addresses: ['127.0.0.1'], port: 2525 }],
      })
    })

    it("always allows the smarthost, the operator's own choice", async () => {
      expect(
        await resolveRoute(zone, 'inside.test', { ...PUBLIC_ONLY, smarthost: { host: 'mx.inside.test', port: 2526 } }),
      ).toEqual({ hosts: [{ name: 'mx.inside.test', addresses: ['127.0.0.1'], port: 2526 }] })
    })
  })
})

describe('nonPublicKind', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['10.0.0.5', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['fec0::1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['100.127.255.255', 'carrier-grade NAT'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.1', 'documentation'],
    ['203.0.113.1', 'documentation'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['2001:2::1', 'benchmarking'],
    ['192.0.0.8', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['100::1', 'reserved'],
    ['64:ff9b:1::1', 'reserved'],
    ['::127.0.0.1', 'reserved'], // IPv4-compatible, deprecated (RFC 4291 §2.5.5.1)
    ['4000::1', 'reserved'],
    // IPv4-mapped, NAT64, 6to4 and Teredo addresses are what the IPv4 address in them is.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.5', 'private'],
    ['64:ff9b::10.0.0.5', 'private'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['2002:a00:5::1', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'loopback'],
    ['2001:0:4136:e378:8000:63bf:f5ff:fffa', 'private'],
    // Public: just outside the ranges, and the embedded forms of a public address.
    ['8.8.8.8', null],
    ['9.255.255.255', null],
    ['11.0.0.0', null],
    ['100.63.255.255', null],
    ['100.128.0.0', null],
    ['172.15.255.255', null],
    ['172.32.0.0', null],
    ['192.167.255.255', null],
    ['192.169.0.0', null],
    ['198.17.255.255', null],
    ['198.20.0.0', null],
    ['223.255.255.255', null],
    ['2606:4700::1111', null],
    ['2a00:1450:4001:81b::200e', null],
    ['::ffff:8.8.8.8', null],
    ['64:ff9b::8.8.8.8', null],
    ['2002:808:808::1', null],
    ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', null],
  ])('%s is %s', (address, kind) => {
    expect(nonPublicKind(address)).toBe(kind)
  })
})

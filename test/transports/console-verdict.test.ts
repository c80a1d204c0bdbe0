import { describe, expect, it } from 'vitest'
// The console's own script, a plain module: the verdict is words, with nothing of the browser in it.
import { LEVELS, sentence, verdict } from '../../transports/console/verdict.js'

type Level = keyof typeof LEVELS
interface Auth {
  spf: { result: string; domain: string | null }
  dkim: { result: string; domain: string | null; selector: string | null }[]
  dmarc: { result: string; policy: string | null; domain: string | null }
  arc: { result: string }
}

const auth = (spf: string, dkim: string[], dmarc: string, arc = 'none'): Auth => ({
  spf: { result: spf, domain: 'example.com' },
  dkim: dkim.map((result) => ({ result, domain: 'example.com', selector: 's1' })),
  dmarc: { result: dmarc, policy: 'reject', domain: 'example.com' },
  arc: { result: arc },
})

// What a person reads of each set of results, and the badge it gets.
const CASES: [string, Auth, Level, string][] = [
  [
    'everything passes',
    auth('pass', ['pass'], 'pass'),
    'ok',
    "Signed by example.com (DKIM pass); sender's server allowed (SPF pass); DMARC pass",
  ],
  [
    'a forgery',
    auth('fail', ['fail'], 'fail'),
    'bad',
    'A signature of example.com does not verify: the message was altered or forged (DKIM fail); ' +
      "sender's server not allowed to send for example.com (SPF fail); " +
      'fails the DMARC policy of example.com: the From address may be forged (DMARC fail)',
  ],
  [
    'forwarded: SPF fails, the signature and DMARC pass, along a valid chain',
    auth('fail', ['pass'], 'pass', 'pass'),
    'ok',
    "Signed by example.com (DKIM pass); sender's server not allowed to send for example.com (SPF fail); " +
      'DMARC pass; forwarded along a valid chain (ARC pass)',
  ],
  [
    'unsigned, SPF softfail, no DMARC policy',
    auth('softfail', [], 'none'),
    'warn',
    "Not signed (DKIM none); sender's server probably not allowed to send for example.com (SPF softfail); " +
      'example.com publishes no DMARC policy (DMARC none)',
  ],
  [
    'a signature that fails, without a DMARC policy',
    auth('none', ['fail'], 'none'),
    'bad',
    'A signature of example.com does not verify: the message was altered or forged (DKIM fail); ' +
      'example.com names no servers allowed to send for it (SPF none); example.com publishes no DMARC policy (DMARC none)',
  ],
  [
    'DNS errors: nothing known',
    auth('temperror', ['permerror'], 'temperror'),
    'warn',
    'DKIM could not be checked (DKIM permerror); SPF could not be checked (SPF temperror); ' +
      'DMARC could not be checked (DMARC temperror)',
  ],
  [
    'a broken forwarding chain, DMARC passing all the same',
    auth('pass', ['pass'], 'pass', 'fail'),
    'ok',
    "Signed by example.com (DKIM pass); sender's server allowed (SPF pass); DMARC pass; " +
      'its forwarding chain is broken (ARC fail)',
  ],
]

describe('the console: a received message’s verdict in words', () => {
  it.each(CASES)('%s', (_name, given, level, words) => {
    const v = verdict(given)
    expect(v.level).toBe(level)
    expect(sentence(v.parts)).toBe(words)
  })

  it('names the domain that signed each signature, and the sender’s domain when a result has none', () => {
    const v = verdict({
      spf: { result: 'fail', domain: null },
      dkim: [
        { result: 'pass', domain: 'esp.example', selector: 'a' },
        { result: 'pass', domain: 'example.com', selector: 'b' },
      ],
      dmarc: { result: 'none', policy: null, domain: null },
      arc: { result: 'none' },
    })
    expect(v.parts.map((p: { text: string }) => p.text)).toEqual([
      'Signed by esp.example (DKIM pass)',
      'Signed by example.com (DKIM pass)',
      "sender's server not allowed to send for the sender's domain (SPF fail)",
      "the sender's domain publishes no DMARC policy (DMARC none)",
    ])
    expect(LEVELS[v.level as Level]).toBe('Failed checks')
  })
})

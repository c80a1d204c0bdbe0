import { describe, expect, it } from 'vitest'
import { headerBlock, status } from '../../relay/reports.js'

describe('the status of a reported recipient (RFC 3464 §2.3.4)', () => {
  it.each([
    ['failed', 550, '550 5.1.1 <x@example.com>: User unknown', '5.1.1'],
    ['failed', 556, '5.1.10 null.test does not accept mail (null MX)', '5.1.10'],
    ['failed', 550, '550-5.7.1 first line\n550 5.7.1 second line', '5.7.1'],
    // A refusal without an enhanced code, or with one of another class, is a plain permanent failure.
    ['failed', 554, '554 Transaction failed', '5.0.0'],
    ['failed', 550, '550 4.2.1 confused server', '5.0.0'],
    // Given up on after temporary failures: the last deferral's code, else delivery time expired.
    ['failed', 450, '450 4.2.1 Mailbox busy (gave up after 7 attempts)', '4.2.1'],
    ['failed', null, 'connect ECONNREFUSED 192.0.2.1:25 (gave up after 7 attempts)', '4.4.7'],
    ['delayed', 451, '451 4.7.1 Greylisted', '4.7.1'],
    ['delayed', null, 'Connection closed unexpectedly', '4.0.0'],
  ] as const)('%s, %s %s → %s', (action, code, response, expected) => {
    expect(status(action, { code, response })).toBe(expected)
  })
})

describe("the original's header block", () => {
  it.each([
    ['CRLF', 'From: a@example.org\r\nSubject: x\r\n\r\nbody\r\n', 'From: a@example.org\r\nSubject: x\r\n'],
    ['bare LF', 'From: a@example.org\nSubject: x\n\nbody\n', 'From: a@example.org\r\nSubject: x\r\n'],
    ['folded', 'Subject: a\r\n b\r\n\r\nbody', 'Subject: a\r\n b\r\n'],
    ['no body', 'Subject: x\r\n', 'Subject: x\r\n'],
  ])('%s', (_label, raw, expected) => {
    expect(headerBlock(Buffer.from(raw)).toString()).toBe(expected)
  })

  it('keeps 8-bit bytes as they are', () => {
    const raw = Buffer.from('Subject: Grüße\r\n\r\nx', 'utf8')
    expect(headerBlock(raw).equals(Buffer.from('Subject: Grüße\r\n', 'utf8'))).toBe(true)
  })
})

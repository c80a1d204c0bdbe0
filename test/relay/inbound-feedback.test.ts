import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { readFeedback } from '../../relay/inbound/feedback.js'
import { eachLeaf } from '../../relay/message-content.js'

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url))
/** Postfix 3.7's own bounce of a message to an unknown local user, as it sent it to the message's return path. */
const POSTFIX_DSN = fixture('postfix-dsn-unknown-user.eml')
/** A feedback loop's abuse report (RFC 5965 §3, after its Appendix B example). */
const ARF = fixture('arf-abuse.eml')

const dsn = (blocks: string) =>
  Buffer.from(
    'From: MAILER-DAEMON@mx.dest.test\r\nContent-Type: multipart/report; report-type=delivery-status; boundary="b"\r\n\r\n' +
      '--b\r\nContent-Type: text/plain\r\n\r\nA report.\r\n' +
      `--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.dest.test\r\n\r\n${blocks}\r\n--b--\r\n`,
  )
const plain = (text: string) => Buffer.from(`From: MAILER-DAEMON@old.test\r\nSubject: failure\r\n\r\n${text}`)

describe('reading what comes back to a return path', () => {
  it.each([
    [
      'Postfix’s own DSN for an unknown user',
      POSTFIX_DSN,
      '',
      'nosuch@dest.test',
      { kind: 'failed', code: 550, response: '5.1.1 unknown user: "nosuch"' },
    ],
    [
      'a DSN with an SMTP diagnostic, about the recipient it names among two',
      dsn(
        'Final-Recipient: rfc822; other@dest.test\r\nAction: failed\r\nStatus: 5.2.2\r\nDiagnostic-Code: smtp; 552 5.2.2 full\r\n\r\n' +
          'Final-Recipient: rfc822; Ann@Dest.test\r\nAction: failed\r\nStatus: 5.7.1\r\nDiagnostic-Code: smtp; 554 5.7.1 rejected by policy',
      ),
      '',
      'ann@dest.test',
      { kind: 'failed', code: 554, response: '554 5.7.1 rejected by policy' },
    ],
    [
      'a delay notice',
      dsn('Final-Recipient: rfc822; ann@dest.test\r\nAction: delayed\r\nStatus: 4.4.1'),
      '',
      'ann@dest.test',
      { kind: 'none', why: "the report's action is delayed, not failed" },
    ],
    [
      'a DSN about two others',
      dsn(
        'Final-Recipient: rfc822; a@x.test\r\nAction: failed\r\n\r\nFinal-Recipient: rfc822; b@x.test\r\nAction: failed',
      ),
      '',
      'ann@dest.test',
      { kind: 'none', why: 'the report names no recipient of this message' },
    ],
    ['an abuse report', ARF, '', 'ann@dest.test', { kind: 'complaint', feedbackType: 'abuse' }],
    [
      'a not-spam report',
      Buffer.from(ARF.toString('latin1').replace('Feedback-Type: abuse', 'Feedback-Type: not-spam'), 'latin1'),
      '',
      'ann@dest.test',
      { kind: 'none', why: 'a feedback report of type not-spam, not a complaint' },
    ],
    [
      'a plain-text bounce from the null sender',
      plain('Hi. This is the mailer.\r\n\r\n  550 5.1.1 <ann@dest.test>... User unknown\r\n'),
      '',
      'ann@dest.test',
      { kind: 'failed', code: 550, response: '550 5.1.1 <ann@dest.test>... User unknown' },
    ],
    [
      'an auto-reply from the null sender',
      plain('I am away until Monday, back on 5 December.\r\n'),
      '',
      'ann@dest.test',
      { kind: 'none', why: 'no permanent failure in the text' },
    ],
    [
      'an auto-reply whose date reads like a status code',
      plain('Thanks for your message. I am on holiday and back on 5.1.26.\r\n550 people wrote today.\r\n'),
      '',
      'ann@dest.test',
      { kind: 'none', why: 'no permanent failure in the text' },
    ],
    [
      'an auto-reply that quotes a failure (RFC 3834)',
      Buffer.from(
        'From: ann@dest.test\r\nAuto-Submitted: auto-replied\r\n\r\nAway. Your last mail got 550 5.1.1 from my old address.\r\n',
      ),
      '',
      'ann@dest.test',
      { kind: 'none', why: 'an auto-reply (Auto-Submitted: auto-replied)' },
    ],
    [
      "qmail's bounce",
      plain('<ann@dest.test>:\r\nSorry, no mailbox here by that name. (#5.1.1)\r\n'),
      '',
      'ann@dest.test',
      { kind: 'failed', code: 550, response: 'Sorry, no mailbox here by that name. (#5.1.1)' },
    ],
    [
      'a DSN naming the recipient in another case, among two',
      dsn(
        'Final-Recipient: rfc822; other@dest.test\r\nAction: delivered\r\nStatus: 2.0.0\r\n\r\n' +
          'Final-Recipient: rfc822; DAVE@dest.test\r\nAction: failed\r\nStatus: 5.1.1',
      ),
      '',
      'DAVE@dest.test',
      { kind: 'failed', code: 550, response: '5.1.1' },
    ],
    [
      'a person quoting a failure',
      plain('Why did I get 550 5.1.1 from you?\r\n'),
      'ann@dest.test',
      'ann@dest.test',
      { kind: 'none', why: 'not a report, and not from the null sender' },
    ],
  ])('%s', (_name, raw, mailFrom, recipient, expected) => {
    expect(readFeedback(raw, mailFrom, recipient)).toEqual(expected)
  })

  it('reads at most 1,000 parts of a message, however many it has', () => {
    const many = Buffer.from(
      `Content-Type: multipart/mixed; boundary=b\r\n\r\n${'--b\r\n\r\n'.repeat(200_000)}--b\r\nContent-Type: message/delivery-status\r\n\r\n\r\nFinal-Recipient: rfc822; ann@dest.test\r\nAction: failed\r\n--b--\r\n`,
    )
    let parts = 0
    eachLeaf(many, () => parts++)
    expect(parts).toBe(999)
    // The report past them is not read.
    expect(readFeedback(many, '', 'ann@dest.test')).toEqual({ kind: 'none', why: 'no permanent failure in the text' })
  })
})

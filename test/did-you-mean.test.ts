import { describe, expect, it } from 'vitest'
import { didYouMean } from '../did-you-mean.js'

const SETTINGS = ['MAILROOM_SMARTHOST', 'MAILROOM_SMTP_HOST', 'MAILROOM_HTTP_PORT', 'MAILROOM_SMTP_PORT']
const ARGUMENTS = ['to', 'from', 'subject', 'body', 'mailid', 'cc']

describe('didYouMean', () => {
  it.each([
    // A letter swapped with its neighbour, missing, extra, or wrong.
    ['MAILROOM_SMARTHOTS', SETTINGS, 'MAILROOM_SMARTHOST'],
    ['MAILROOM_HTTP_PROT', SETTINGS, 'MAILROOM_HTTP_PORT'],
    ['MAILROOM_SMARTHST', SETTINGS, 'MAILROOM_SMARTHOST'],
    ['MAILROOM_SMARTHOSTS', SETTINGS, 'MAILROOM_SMARTHOST'],
    ['MAILROOM_SMTP_PART', SETTINGS, 'MAILROOM_SMTP_PORT'],
    // Case alone, before anything nearer by letters.
    ['mailroom_smtp_port', SETTINGS, 'MAILROOM_SMTP_PORT'],
    ['mailId', ARGUMENTS, 'mailid'],
    ['BCC', ARGUMENTS, undefined],
    // Two edits for a long name; a short one gets fewer.
    ['MAILROOM_SMARTHOTSS', SETTINGS, 'MAILROOM_SMARTHOST'],
    ['mialid', ARGUMENTS, 'mailid'],
    ['bcc', ARGUMENTS, undefined],
    ['xy', ARGUMENTS, undefined],
    ['MAILROOM_COLOUR', SETTINGS, undefined],
  ])('%s among %j: %s', (name, known, expected) => {
    expect(didYouMean(name, known)).toBe(expected)
  })
})

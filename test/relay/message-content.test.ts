import { describe, expect, it } from 'vitest'
import { composeMessage } from '../../relay/message.js'
import { messageContent } from '../../relay/message-content.js'

const read = (raw: string) => messageContent(Buffer.from(raw.replaceAll('\n', '\r\n'), 'latin1'))

describe('messageContent', () => {
  it('reads the text and HTML of a message the API composed, attachments left out', () => {
    const { raw } = composeMessage({
      from: { name: '', address: 'me@example.org' },
      to: [{ name: '', address: 'bob@example.com' }],
      subject: 'hi',
      body: '<p>Grüße, <b>Bob</b></p>',
      attachments: [{ filename: 'note.html', data: Buffer.from('<p>attached</p>').toString('base64') }],
      txid: '0190f3a2b4c5d6e7f8',
      date: new Date(0),
    })
    const content = messageContent(raw)
    expect(content.html).toBe('<p>Grüße, <b>Bob</b></p>')
    expect(content.text).toMatch(/^Grüße, Bob/)
  })

  it('a message without a Content-Type is text; a single HTML part has no text', () => {
    expect(read('Subject: x\n\nhello\n')).toEqual({ text: 'hello\r\n', html: null })
    expect(read('Content-Type: text/html\n\n<p>hi</p>')).toEqual({ text: null, html: '<p>hi</p>' })
  })

  it('undoes base64 and quoted-printable, and reads the charset', () => {
    const html = Buffer.from('<p>caf\xe9</p>', 'latin1').toString('base64')
    const raw = [
      'Content-Type: multipart/alternative;',
      ' boundary="b1"',
      '',
      'preamble',
      '--b1',
      'Content-Type: text/plain; charset=utf-8',
      'Content-Transfer-Encoding: quoted-printable',
      '',
      'caf=C3=A9 au=',
      ' lait',
      '--b1',
      'Content-Type: text/html; charset=iso-8859-1',
      'Content-Transfer-Encoding: base64',
      '',
      html,
      '--b1--',
      'epilogue',
    ].join('\n')
    expect(read(raw)).toEqual({ text: 'café au lait', html: '<p>café</p>' })
  })

  it('an unknown charset is read as UTF-8; an unending nest of multiparts is not followed', () => {
    expect(read('Content-Type: text/plain; charset=x-unknown\n\nok').text).toBe('ok')
    const nest = Array.from(
      { length: 50 },
      (_, i) => `Content-Type: multipart/mixed; boundary=b${i}\n\n--b${i}\n`,
    ).join('')
    expect(read(`${nest}Content-Type: text/plain\n\ndeep`)).toEqual({ text: null, html: null })
  })
})

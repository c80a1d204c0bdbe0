import { describe, expect, it } from 'vitest'
import { elideLargeBodies, PARSE_LIMITS, parseInbound } from '../../relay/inbound/parse.js'
import { ByteRun, countBoundaryLines, mimeLeaves, splitHead } from '../../relay/inbound/pieces.js'

const crlf = (lines: string[]) => Buffer.from(lines.join('\r\n'))

const REPLY = crlf([
  'From: "Bob B" <bob@client.test>',
  'Reply-To: Bob Desk <desk@client.test>',
  'To: quotes@acme.test, Team: c@acme.test, d@acme.test;',
  'Cc: e@client.test',
  'Subject: =?UTF-8?Q?R=C3=A9?= your quote',
  'Message-ID: <m1@client.test>',
  'In-Reply-To: <m0@acme.test>',
  'References: <r1@acme.test>',
  ' <m0@acme.test>',
  'Date: Mon, 02 Nov 2026 10:00:00 +0000',
  'MIME-Version: 1.0',
  'Content-Type: multipart/mixed; boundary=b',
  '',
  '--b',
  'Content-Type: text/plain; charset=utf-8',
  '',
  'Thanks, that works for us.',
  '',
  'On Mon, Nov 2, 2026 at 9:00 AM Quotes <quotes@acme.test> wrote:',
  '> Here is the quote.',
  '> Best',
  '--b',
  'Content-Type: application/pdf; name=q.pdf',
  'Content-Disposition: attachment; filename=q.pdf',
  'Content-Transfer-Encoding: base64',
  '',
  'aGVsbG8gd29ybGQ=',
  '--b--',
  '',
])

describe('parseInbound', () => {
  it('reads the headers, the text, the new part of the reply and the attachments', async () => {
    const parsed = await parseInbound(REPLY, 'bob@client.test')
    expect(parsed).toEqual({
      messageId: 'm1@client.test',
      inReplyTo: 'm0@acme.test',
      references: ['r1@acme.test', 'm0@acme.test'],
      from: { address: 'bob@client.test', name: 'Bob B' },
      replyTo: [{ address: 'desk@client.test', name: 'Bob Desk' }],
      to: [
        { address: 'quotes@acme.test', name: '' },
        { address: 'c@acme.test', name: '' },
        { address: 'd@acme.test', name: '' },
      ],
      cc: [{ address: 'e@client.test', name: '' }],
      subject: 'Ré your quote',
      date: Date.UTC(2026, 10, 2, 10),
      text: expect.stringContaining('> Here is the quote.'),
      html: null,
      extractedText: 'Thanks, that works for us.',
      attachments: [{ index: 0, filename: 'q.pdf', contentType: 'application/pdf', size: 11 }],
      automatic: null,
    })
  })

  it('reads a message in pieces cut anywhere as it reads it whole', async () => {
    const whole = await parseInbound(REPLY, 'bob@client.test')
    for (let cut = 1; cut < REPLY.length; cut += 7) {
      const pieces = [REPLY.subarray(0, cut), REPLY.subarray(cut, cut + 5), REPLY.subarray(cut + 5)]
      expect(await parseInbound(pieces, 'bob@client.test')).toEqual(whole)
    }
  })

  it('finds the head and counts boundary lines across the seams of pieces', () => {
    const raw = Buffer.from('Subject: x\r\n\r\n--b\r\nhi\r\n--b\r\n--b--\r\n')
    for (let cut = 0; cut <= raw.length; cut++)
      for (const second of [1, 2, 3]) {
        const pieces = [raw.subarray(0, cut), raw.subarray(cut, cut + second), raw.subarray(cut + second)]
        expect(countBoundaryLines(pieces, 100), `cut at ${cut}+${second}`).toBe(3)
        const { head, rest } = splitHead(pieces)
        expect(head.toString()).toBe('Subject: x')
        expect(Buffer.concat(rest).toString()).toBe(raw.subarray(10).toString())
      }
  })

  it('keeps no attachment bytes, only their sizes, and numbers them in order', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 7)
    const raw = crlf([
      'From: a@client.test',
      'Subject: files',
      'Content-Type: multipart/mixed; boundary=z',
      '',
      '--z',
      'Content-Type: text/plain',
      '',
      'two files',
      '--z',
      'Content-Type: application/octet-stream',
      'Content-Disposition: attachment; filename="big.bin"',
      'Content-Transfer-Encoding: base64',
      '',
      big.toString('base64').replace(/.{76}/g, '$&\r\n'),
      '--z',
      'Content-Type: image/png',
      'Content-Disposition: inline',
      'Content-Transfer-Encoding: base64',
      '',
      'iVBORw0KGgo=',
      '--z--',
      '',
    ])
    const parsed = await parseInbound(raw, 'a@client.test')
    expect(parsed.attachments).toEqual([
      { index: 0, filename: 'big.bin', contentType: 'application/octet-stream', size: big.length },
      { index: 1, filename: null, contentType: 'image/png', size: 8 },
    ])
    expect(JSON.stringify(parsed).length).toBeLessThan(2000)
  })

  it('takes the text of an HTML-only message for extractedText, and keeps the HTML as received', async () => {
    const html = '<p>Yes, <b>Tuesday</b> is fine.</p><blockquote>On Monday you wrote: when?</blockquote>'
    const raw = crlf(['From: a@client.test', 'Subject: html', 'Content-Type: text/html; charset=utf-8', '', html, ''])
    const parsed = await parseInbound(raw, 'a@client.test')
    expect(parsed.html?.trimEnd()).toBe(html)
    expect(parsed.text).toContain('> On Monday you wrote: when?')
    expect(parsed.extractedText).toBe('Yes, Tuesday is fine.')
  })

  it('reads the new part with email-reply-parser only in a message that answers one or quotes', async () => {
    const text = ['Our new price list is attached.', '', 'Regards,', 'Bob', '']
    const head = ['From: bob@client.test', 'Subject: prices', 'Content-Type: text/plain']
    const fresh = await parseInbound(crlf([...head, '', ...text]), 'bob@client.test')
    expect(fresh.extractedText).toBe('Our new price list is attached.\n\nRegards,\nBob')
    const reply = await parseInbound(crlf([...head, 'In-Reply-To: <p0@acme.test>', '', ...text]), 'bob@client.test')
    expect(reply.extractedText).toBe('Our new price list is attached.')
    const quoting = await parseInbound(crlf([...head, '', 'Agreed.', '', '> the old prices', '']), 'bob@client.test')
    expect(quoting.extractedText).toBe('Agreed.')
  })

  it('gives nulls for what a message lacks', async () => {
    const parsed = await parseInbound(crlf(['X-Nothing: here', '', '']), 'a@client.test')
    expect(parsed).toMatchObject({
      messageId: null,
      inReplyTo: null,
      references: [],
      from: null,
      subject: null,
      date: null,
      text: null,
      html: null,
      extractedText: null,
      attachments: [],
    })
  })

  // RFC 3834: what is sent automatically is never answered automatically.
  it.each([
    [['Auto-Submitted: auto-replied'], 'x@client.test', 'Auto-Submitted: auto-replied'],
    [['Auto-Submitted: Auto-Generated (vacation); x=1'], 'x@client.test', 'Auto-Submitted: auto-generated'],
    [['Auto-Submitted: no'], 'x@client.test', null],
    [['Precedence: bulk'], 'x@client.test', 'Precedence: bulk'],
    [['Precedence: List'], 'x@client.test', 'Precedence: list'],
    [['Precedence: junk'], 'x@client.test', 'Precedence: junk'],
    [['Precedence: first-class'], 'x@client.test', null],
    [['List-Id: <talk.lists.client.test>'], 'x@client.test', null],
    [[], '', 'null envelope sender (a bounce or report)'],
    [[], 'MAILER-DAEMON@mx.client.test', 'envelope sender MAILER-DAEMON@mx.client.test'],
    [[], 'postmaster@client.test', 'envelope sender postmaster@client.test'],
    [[], 'x@client.test', null],
  ])('automatic: %j from <%s> → %s', async (headers, mailFrom, why) => {
    const raw = crlf(['From: x@client.test', 'Subject: s', ...headers, '', 'body', ''])
    expect((await parseInbound(raw, mailFrom)).automatic).toBe(why)
  })

  it('parses only the headers of a message of too many parts', async () => {
    const parts = Array.from({ length: 20_000 }, (_, i) =>
      ['--b', 'Content-Type: application/octet-stream', `Content-Disposition: attachment; filename=${i}`, '', 'x'].join(
        '\r\n',
      ),
    )
    const raw = crlf([
      'From: x@client.test',
      'Subject: many',
      'Content-Type: multipart/mixed; boundary=b',
      '',
      ...parts,
      '--b--',
      '',
    ])
    const parsed = await parseInbound(raw, 'x@client.test')
    expect(parsed).toMatchObject({ subject: 'many', from: { address: 'x@client.test' }, text: null, attachments: [] })
  })

  it('keeps no HTML past its cap, and turns none past its cap into text', async () => {
    const html = `<html><body>${'<div>word</div>'.repeat(PARSE_LIMITS.maxHtml / 10)}</body></html>`
    const raw = crlf(['From: x@client.test', 'Subject: huge', 'Content-Type: text/html', '', html, ''])
    const parsed = await parseInbound(raw, 'x@client.test')
    expect(parsed).toMatchObject({ subject: 'huge', html: null, text: null, extractedText: null })
  })

  it('cuts a text past its cap, and marks the cut', async () => {
    const line = 'a line of text that goes on\r\n'
    const body = line.repeat(Math.ceil((PARSE_LIMITS.maxText * 1.5) / line.length))
    const raw = crlf(['From: x@client.test', 'Subject: long', 'Content-Type: text/plain', '', body])
    const parsed = await parseInbound(raw, 'x@client.test')
    expect(parsed.text!.length).toBe(PARSE_LIMITS.maxText + '\n[cut]'.length)
    expect(parsed.text!.endsWith('\n[cut]')).toBe(true)
    expect(parsed.extractedText!.length).toBeLessThanOrEqual(PARSE_LIMITS.maxReplyInput)
  })
})

/** Bytes that are the same in every run: `n` of them, from `seed`. */
const bytes = (n: number, seed = 1) => {
  const out = Buffer.alloc(n)
  let x = seed
  for (let i = 0; i < n; i++) out[i] = (x = (x * 1103515245 + 12345) >>> 0) >>> 24
  return out
}
const base64Lines = (data: Buffer, eol = '\r\n') => data.toString('base64').replace(/.{76}/g, `$&${eol}`)
/** Lines of text, `n` bytes of them or a little more, each ending in `eol`. */
const textLines = (n: number, eol = '\r\n') =>
  `${'a line of an attached text file, in 7bit;'.padEnd(70, '.')}${eol}`.repeat(Math.ceil(n / (70 + eol.length)))
const inPieces = (raw: Buffer, size: number) =>
  Array.from({ length: Math.ceil(raw.length / size) }, (_, i) => raw.subarray(i * size, (i + 1) * size))

const BIG = 300 * 1024
const FILE = bytes(BIG)

/** Messages with large attachments, each with how many bodies elision leaves out. */
function elisionCases(eol: string): [string, Buffer, number][] {
  const msg = (lines: string[]) => Buffer.from(lines.join(eol), 'latin1')
  const head = (type: string) => [
    'From: a@client.test',
    'To: in@acme.test',
    'Subject: files',
    'MIME-Version: 1.0',
    type,
  ]
  return [
    [
      'a large base64 attachment',
      msg([
        ...head('Content-Type: multipart/mixed; boundary="b1"'),
        '',
        'preamble',
        '--b1',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'The file is attached.',
        '--b1',
        'Content-Type: application/octet-stream; name="big.bin"',
        'Content-Disposition: attachment; filename="big.bin"',
        'Content-Transfer-Encoding: base64',
        '',
        base64Lines(FILE, eol),
        '--b1--',
        'epilogue',
        '',
      ]),
      1,
    ],
    [
      'a large 7bit attachment and a large 8bit one',
      msg([
        ...head('Content-Type: multipart/mixed; boundary=b2'),
        '',
        '--b2',
        'Content-Type: text/plain',
        '',
        'Two files.',
        '--b2',
        'Content-Type: text/csv; charset=us-ascii',
        'Content-Disposition: attachment; filename=rows.csv',
        'Content-Transfer-Encoding: 7bit',
        '',
        textLines(BIG, eol),
        '--b2',
        'Content-Type: application/octet-stream',
        'Content-Disposition: attachment; filename=raw.bin',
        'Content-Transfer-Encoding: 8bit',
        '',
        // No line starts with `--` (else it is not left out): every byte but LF and `-`.
        bytes(BIG, 7)
          .map((b) => (b === 0x0a || b === 0x2d ? 0x41 : b))
          .toString('latin1'),
        '--b2--',
        '',
      ]),
      2,
    ],
    [
      'a multipart/mixed in a multipart/alternative, in a multipart/mixed',
      msg([
        ...head(`Content-Type: multipart/mixed;${eol} boundary="outer"`),
        '',
        '--outer',
        'Content-Type: multipart/alternative; boundary="alt"',
        '',
        '--alt',
        'Content-Type: text/plain; charset=utf-8',
        '',
        'Plain words.',
        '--alt',
        'Content-Type: multipart/mixed; boundary="inner"',
        '',
        '--inner',
        'Content-Type: text/html; charset=utf-8',
        '',
        '<p>HTML words.</p>',
        '--inner',
        'Content-Type: image/png',
        'Content-Disposition: inline; filename=pic.png',
        'Content-Transfer-Encoding: base64',
        '',
        base64Lines(FILE, eol),
        '--inner--',
        '--alt--',
        '--outer',
        'Content-Type: application/pdf; name=q.pdf',
        'Content-Transfer-Encoding: base64',
        '',
        base64Lines(bytes(BIG + 1, 3), eol),
        '--outer--',
        '',
      ]),
      2,
    ],
    [
      'a message/rfc822 attachment, and an inline one read as a message with its own attachment',
      msg([
        ...head('Content-Type: multipart/mixed; boundary=m'),
        '',
        '--m',
        'Content-Type: text/plain',
        '',
        'Forwarded twice.',
        '--m',
        'Content-Type: message/rfc822',
        'Content-Disposition: attachment; filename=fwd.eml',
        '',
        'From: c@client.test',
        'Subject: attached',
        '',
        textLines(BIG, eol),
        '--m',
        'Content-Type: message/rfc822',
        'Content-Disposition: inline',
        '',
        'From: d@client.test',
        'Subject: inline',
        'Content-Type: multipart/mixed; boundary=n',
        '',
        '--n',
        'Content-Type: text/plain',
        '',
        'The inner text.',
        '--n',
        'Content-Type: application/zip',
        'Content-Disposition: attachment; filename=inner.zip',
        'Content-Transfer-Encoding: base64',
        '',
        base64Lines(FILE, eol),
        '--n--',
        '--m--',
        '',
      ]),
      2,
    ],
    [
      'an attachment with no filename, and a boundary of regex characters',
      msg([
        ...head('Content-Type: multipart/mixed; boundary="=_(a+b)*?.[c]^$|{d}\\\\"'),
        '',
        '--=_(a+b)*?.[c]^$|{d}\\',
        'Content-Type: text/plain',
        '',
        'Nameless.',
        '--=_(a+b)*?.[c]^$|{d}\\',
        'Content-Type: application/octet-stream',
        'Content-Transfer-Encoding: base64',
        '',
        base64Lines(FILE, eol),
        '--=_(a+b)*?.[c]^$|{d}\\--',
        '',
      ]),
      1,
    ],
    [
      'a last part that runs to the end of the message, no closing delimiter',
      msg([
        ...head('Content-Type: multipart/mixed; boundary=open'),
        '',
        '--open',
        'Content-Type: text/plain',
        '',
        'Cut short.',
        '--open',
        'Content-Type: application/octet-stream; name=tail.bin',
        'Content-Transfer-Encoding: base64',
        '',
        `${base64Lines(bytes(BIG + 2, 5), eol)}${eol}`,
      ]),
      1,
    ],
    [
      'a 7bit last part that runs to the end of the message',
      msg([
        ...head('Content-Type: multipart/mixed; boundary=open'),
        '',
        '--open',
        'Content-Type: application/octet-stream; name=tail.txt',
        '',
        textLines(BIG, eol),
      ]),
      1,
    ],
    [
      'a message that is one attachment, padded base64',
      msg([
        ...head('Content-Type: application/zip; name=all.zip'),
        'Content-Transfer-Encoding: base64',
        '',
        base64Lines(bytes(BIG + 1, 9), eol),
        '',
      ]),
      1,
    ],
    [
      'what is kept: text shown inline, quoted-printable, base64 with padding inside, a line of `--`',
      msg([
        ...head('Content-Type: multipart/mixed; boundary=k'),
        '',
        '--k',
        'Content-Type: text/plain',
        '',
        textLines(BIG, eol),
        '--k',
        'Content-Type: text/plain',
        'Content-Disposition: attachment; filename=notes.txt',
        '',
        textLines(BIG, eol),
        '--k',
        'Content-Type: application/octet-stream; name=q.bin',
        'Content-Transfer-Encoding: quoted-printable',
        '',
        textLines(BIG, `=${eol}`),
        '--k',
        'Content-Type: application/octet-stream; name=pads.bin',
        'Content-Transfer-Encoding: base64',
        '',
        `${'QUJD'.repeat(30)}QQ==${eol}`.repeat(BIG / 124),
        '--k',
        'Content-Type: application/octet-stream; name=sig.txt',
        '',
        `${textLines(BIG / 2, eol)}-- ${eol}signature${eol}${textLines(BIG / 2, eol)}`,
        '--k--',
        '',
      ]),
      1,
    ],
  ]
}

describe('parseInbound: large attachments left out of the parse', () => {
  for (const eol of ['\r\n', '\n'])
    for (const [name, raw, elided] of elisionCases(eol))
      it(`${name} (${eol === '\n' ? 'LF' : 'CRLF'}): the same as parsed whole`, async () => {
        const whole = await parseInbound(raw, 'a@client.test', Number.POSITIVE_INFINITY)
        expect(whole.attachments.length).toBeGreaterThan(0)
        for (const pieces of [[raw], inPieces(raw, 64 * 1024 + 7), inPieces(raw, 1000)]) {
          const left = elideLargeBodies(pieces, PARSE_LIMITS.elideBody)
          expect(left?.sizes.length ?? 0).toBe(elided)
          // Views of the message's own memory, and markers: no copy of a large part.
          for (const buf of left?.input ?? [])
            expect(buf.length < 100 || pieces.some((p) => p.buffer === buf.buffer)).toBe(true)
          expect(await parseInbound(pieces, 'a@client.test')).toEqual(whole)
        }
      })

  it('counts the sizes the attachments decode to', async () => {
    const [, raw] = elisionCases('\r\n')[0]
    const parsed = await parseInbound(raw, 'a@client.test')
    expect(parsed.text?.trim()).toBe('The file is attached.')
    expect(parsed.attachments).toEqual([
      { index: 0, filename: 'big.bin', contentType: 'application/octet-stream', size: FILE.length },
    ])
  })

  it('parses whole a message whose structure it reads otherwise than mailparser', async () => {
    // An encoded word as the disposition: mailparser decodes it (inline), the scan does not.
    const raw = crlf([
      'From: a@client.test',
      'Content-Type: multipart/mixed; boundary=w',
      '',
      '--w',
      'Content-Type: text/plain',
      'Content-Disposition: =?utf-8?q?inline?=',
      'Content-Transfer-Encoding: base64',
      '',
      base64Lines(Buffer.from('words '.repeat(BIG / 6))),
      '--w--',
      '',
    ])
    expect(elideLargeBodies([raw], PARSE_LIMITS.elideBody)?.sizes).toEqual([BIG])
    const parsed = await parseInbound(raw, 'a@client.test')
    expect(parsed).toEqual(await parseInbound(raw, 'a@client.test', Number.POSITIVE_INFINITY))
    expect(parsed.text?.startsWith('words words')).toBe(true)
    expect(parsed.attachments).toEqual([])
  })

  it('takes no marker from the sender', async () => {
    const forged = 'mailroom-elided-000000000000000000000000-0'
    const raw = crlf([
      'From: a@client.test',
      'Content-Type: multipart/mixed; boundary=f',
      '',
      '--f',
      'Content-Type: application/octet-stream; name=small.bin',
      '',
      forged,
      '--f',
      'Content-Type: application/octet-stream; name=big.bin',
      'Content-Transfer-Encoding: base64',
      '',
      base64Lines(FILE),
      '--f--',
      '',
    ])
    expect((await parseInbound(raw, 'a@client.test')).attachments.map((a) => a.size)).toEqual([forged.length, BIG])
  })

  it('parses as before what the scan gives up on, and stays linear on hostile structure', async () => {
    const MB = 1024 * 1024
    const mixed = (...lines: string[]) =>
      crlf(['From: a@client.test', 'Subject: hostile', 'Content-Type: multipart/mixed; boundary=h', '', ...lines])
    // Each with the large leaves the scan finds (null: it gives up), and how many are left out.
    const cases: [string, Buffer, number | null, number][] = [
      // 20 MB of base64 without a line end, and no closing delimiter.
      [
        'a line of 20 MB',
        mixed(
          '--h',
          'Content-Type: application/octet-stream',
          'Content-Transfer-Encoding: base64',
          '',
          'A'.repeat(20 * MB),
        ),
        1,
        1,
      ],
      // A part's header block that never ends (within mailparser's 1 MB for a header).
      ['a header block never ended', mixed('--h', `X-Long: ${'x'.repeat(76)}\r\n`.repeat(6000)), null, 0],
      // An inner multipart never closed: the outer delimiter ends it, and the attachment after it is left out.
      [
        'a boundary never closed',
        mixed(
          '--h',
          'Content-Type: multipart/mixed; boundary=never',
          '',
          '--never',
          'Content-Type: text/plain',
          '',
          'inside',
          '--h',
          'Content-Type: application/octet-stream',
          'Content-Transfer-Encoding: base64',
          '',
          base64Lines(FILE),
          '--h--',
          '',
        ),
        1,
        1,
      ],
      // 2 MB of lines that start with `--` and are no delimiter, in a 7bit attachment: kept.
      [
        'lines of --',
        mixed('--h', 'Content-Type: application/octet-stream', '', '--x\r\n'.repeat(MB / 2), '--h--', ''),
        1,
        0,
      ],
    ]
    for (const [name, raw, leaves, elided] of cases) {
      expect(mimeLeaves(new ByteRun(inPieces(raw, MB)), PARSE_LIMITS.elideBody)?.length ?? null, name).toBe(leaves)
      expect(elideLargeBodies(inPieces(raw, MB), PARSE_LIMITS.elideBody)?.sizes.length ?? 0, name).toBe(elided)
      expect(await parseInbound(inPieces(raw, MB), 'a@client.test'), name).toEqual(
        await parseInbound(raw, 'a@client.test', Number.POSITIVE_INFINITY),
      )
    }
    // A header line of 20 MB with no line end: the scan stops at its bound.
    expect(mimeLeaves(new ByteRun([Buffer.from(`Subject: ${'s'.repeat(20 * MB)}`)]), 1)).toBeNull()
  })

  it('reads bytes across the seams of pieces', () => {
    const raw = Buffer.from('ab\n--c\n\r--d\n')
    for (let cut = 0; cut <= raw.length; cut++)
      for (const size of [1, 2, 3]) {
        const run = new ByteRun([raw.subarray(0, cut), ...inPieces(raw.subarray(cut), size)])
        expect(run.indexOf(Buffer.from('\n--'), 0)).toBe(2)
        expect(run.indexOf(Buffer.from('\n\r--'), 0)).toBe(6)
        expect(run.indexOf(Buffer.from('\n--'), 3)).toBe(-1)
        expect(Buffer.concat(run.views(1, 9)).toString()).toBe(raw.subarray(1, 9).toString())
      }
  })
})

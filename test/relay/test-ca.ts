import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generate } from 'selfsigned'

// A certificate authority of the tests' own, made at test time: what MAILROOM_OUTBOUND_CA trusts
// beside the system's CAs, and the certificates it issues to MX and MTA-STS policy hosts.

const DAY = 86_400_000

export async function startTestCa() {
  const now = Date.now()
  const ca = await generate([{ name: 'commonName', value: 'mailroom test CA' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate: new Date(now - DAY),
    notAfterDate: new Date(now + 30 * DAY),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  })
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-test-ca-'))
  const file = join(dir, 'ca.pem')
  writeFileSync(file, ca.cert)
  /**
   * A certificate this CA issues for `names` (DNS names in its subjectAltName), valid from
   * yesterday, or expired when asked; `cnOnly` names only the first, as its subject's CN.
   */
  const issue = async (names: string[], options: { expired?: boolean; cnOnly?: boolean } = {}) => {
    const end = options.expired ? now - DAY : now + 30 * DAY
    const leaf = await generate([{ name: 'commonName', value: names[0] }], {
      keyType: 'ec',
      algorithm: 'sha256',
      notBeforeDate: new Date(end - 60 * DAY),
      notAfterDate: new Date(end),
      ca: { key: ca.private, cert: ca.cert },
      extensions: [
        { name: 'basicConstraints', cA: false },
        ...(options.cnOnly ? [] : [{ name: 'subjectAltName', altNames: names.map((value) => ({ type: 2, value })) }]),
      ],
    })
    return { key: leaf.private, cert: leaf.cert }
  }
  /** A certificate for `names` that no CA issued. */
  const selfSigned = async (names: string[]) => {
    const pems = await generate([{ name: 'commonName', value: names[0] }], {
      keyType: 'ec',
      algorithm: 'sha256',
      extensions: [{ name: 'subjectAltName', altNames: names.map((value) => ({ type: 2, value })) }],
    })
    return { key: pems.private, cert: pems.cert }
  }
  return { file, cert: ca.cert, issue, selfSigned, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

export type TestCa = Awaited<ReturnType<typeof startTestCa>>

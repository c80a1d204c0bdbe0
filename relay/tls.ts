import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generate } from 'selfsigned'
import type { Config } from '../config.js'

export const GENERATED_CERT = 'smtp-cert.pem'
export const GENERATED_KEY = 'smtp-key.pem'

/**
 * The STARTTLS certificate: the configured files, or a self-signed one generated into the data
 * directory on first start (clients of a self-signed server must not verify it, or trust it).
 */
export async function loadTls(config: Pick<Config, 'smtp' | 'dataDir' | 'nodeName'>): Promise<{ key: Buffer; cert: Buffer }> {
  if (config.smtp.tls) return { key: readFileSync(config.smtp.tls.key), cert: readFileSync(config.smtp.tls.cert) }
  const certFile = join(config.dataDir, GENERATED_CERT)
  const keyFile = join(config.dataDir, GENERATED_KEY)
  if (!existsSync(certFile) || !existsSync(keyFile)) {
    const now = new Date()
    const pems = await generate([{ name: 'commonName', value: config.nodeName }], {
      keyType: 'ec',
      algorithm: 'sha256',
      notBeforeDate: now,
      notAfterDate: new Date(now.getTime() + 10 * 365 * 86_400_000),
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: config.nodeName }, { type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] }],
    })
    writeFileSync(keyFile, pems.private, { mode: 0o600 })
    writeFileSync(certFile, pems.cert)
  }
  return { key: readFileSync(keyFile), cert: readFileSync(certFile) }
}

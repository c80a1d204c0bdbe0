import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createSecureContext } from 'node:tls'
import { generate } from 'selfsigned'
import { ConfigError, type Config } from '../config.js'

export const GENERATED_CERT = 'smtp-cert.pem'
export const GENERATED_KEY = 'smtp-key.pem'

/** The certificate file submission clients are shown: the configured one, or the generated one. */
export const tlsCertFile = (config: Pick<Config, 'smtp' | 'dataDir'>) =>
  config.smtp.tls?.cert ?? join(config.dataDir, GENERATED_CERT)

/**
 * The submission certificate (STARTTLS and implicit TLS): the configured files, or a self-signed
 * one generated into the data directory on first start (its clients trust that file as their CA,
 * or do not verify). Read once, at start: a renewed certificate is used from the next start.
 */
export async function loadTls(
  config: Pick<Config, 'smtp' | 'dataDir' | 'nodeName'>,
): Promise<{ key: Buffer; cert: Buffer }> {
  if (config.smtp.tls) {
    const { key, cert } = config.smtp.tls
    try {
      const pems = { key: readFileSync(key), cert: readFileSync(cert) }
      createSecureContext(pems)
      return pems
    } catch (err) {
      throw new ConfigError(
        `cannot use the TLS certificate ${cert} and key ${key} (MAILROOM_TLS_CERT, MAILROOM_TLS_KEY): ${(err as Error).message}`,
      )
    }
  }
  const certFile = join(config.dataDir, GENERATED_CERT)
  const keyFile = join(config.dataDir, GENERATED_KEY)
  if (!existsSync(certFile) || !existsSync(keyFile)) {
    const now = new Date()
    const pems = await generate([{ name: 'commonName', value: config.nodeName }], {
      keyType: 'ec',
      algorithm: 'sha256',
      notBeforeDate: now,
      notAfterDate: new Date(now.getTime() + 10 * 365 * 86_400_000),
      extensions: [
        {
          name: 'subjectAltName',
          altNames: [
            { type: 2, value: config.nodeName },
            { type: 2, value: 'localhost' },
            { type: 7, ip: '127.0.0.1' },
          ],
        },
      ],
    })
    // With a server database nothing else made the data directory: it holds the key, so it is the owner's alone.
    mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
    writeFileSync(keyFile, pems.private, { mode: 0o600 })
    writeFileSync(certFile, pems.cert)
  }
  return { key: readFileSync(keyFile), cert: readFileSync(certFile) }
}

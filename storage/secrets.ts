import { createCipheriv, createDecipheriv, createHmac, hash, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type Store, unsubscribeLinkOf } from './store.js'

export const SECRET_FILE = 'secret.key'
const API_KEY_PREFIX = 'mr_'
/** Characters a generated password is drawn from: no look-alikes (0/O, 1/l/I), nothing that needs quoting. */
const PASSWORD_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789'
const PASSWORD_LENGTH = 24

/**
 * The server secret that encrypts order passwords: 32 random bytes in `<dataDir>/secret.key`,
 * created on first use with mode 0600. Losing it makes stored passwords unreadable.
 */
export function loadOrCreateSecret(dataDir: string): Buffer {
  const file = join(dataDir, SECRET_FILE)
  if (!existsSync(file)) {
    // 'wx' fails if another process created it first; then we read theirs.
    try {
      writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' })
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
  return readSecretFile(file)
}

function readSecretFile(file: string): Buffer {
  const secret = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64')
  if (secret.length !== 32) throw new Error(`${file} is not a 32-byte base64 secret`)
  return secret
}

/** Thrown when a given secret does not decrypt what the database holds. */
export class WrongSecretError extends Error {
  constructor(
    /** The data directory's secret.key when it is the key that does, else null. */
    readonly file: string | null,
  ) {
    super('the secret does not decrypt the order passwords and DKIM keys stored in the database')
  }
}

/**
 * Refuses `secret` when it does not decrypt `stored` (one value of each kind the database
 * holds): AES-GCM's tag fails under any other key. Checked at start, or a wrong key would show
 * only at the first login or signature, and new secrets would be encrypted with a key the old
 * ones do not share. Names the data directory's secret.key when that is the key that does.
 */
export function checkSecret(secret: Buffer, stored: string[], dataDir: string): void {
  const opens = (key: Buffer) =>
    stored.every((value) => {
      try {
        decrypt(key, value)
        return true
      } catch {
        return false
      }
    })
  if (opens(secret)) return
  const file = join(dataDir, SECRET_FILE)
  throw new WrongSecretError(existsSync(file) && opens(readSecretFile(file)) ? file : null)
}

/** AES-256-GCM; the result is `v1:` + base64(iv | tag | ciphertext). */
export function encrypt(secret: Buffer, plain: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', secret, iv)
  const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
  return `v1:${Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64')}`
}

export function decrypt(secret: Buffer, stored: string): string {
  if (!stored.startsWith('v1:')) throw new Error('unknown encryption format')
  const raw = Buffer.from(stored.slice(3), 'base64')
  const decipher = createDecipheriv('aes-256-gcm', secret, raw.subarray(0, 12))
  decipher.setAuthTag(raw.subarray(12, 28))
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8')
}

/**
 * A key for one use of the server secret (HKDF, RFC 5869), so that what is sealed for the public,
 * such as an unsubscribe link, is never sealed under the key of the stored passwords.
 */
export const subkey = (secret: Buffer, purpose: string): Buffer =>
  Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), `mailroom ${purpose}`, 32))

/** A value sealed into a URL-safe token (AES-256-GCM): unreadable and unforgeable without `key`. */
export const sealToken = (key: Buffer, value: unknown): string =>
  Buffer.from(encrypt(key, JSON.stringify(value)).slice(3), 'base64').toString('base64url')

/** What sealToken sealed under `key`, or undefined for a token it did not make (forged, altered, cut). */
export function openToken(key: Buffer, token: string): unknown {
  if (!/^[\w-]{40,1400}$/.test(token)) return undefined
  try {
    return JSON.parse(decrypt(key, `v1:${Buffer.from(token, 'base64url').toString('base64')}`))
  } catch {
    return undefined
  }
}

/** The Store's unsubscribe tokens, sealed under the secret's `unsubscribe links` subkey (both backends). */
export function unsubscribeTokens(secret: Buffer): Pick<Store['blocks'], 'unsubscribeToken' | 'openUnsubscribeToken'> {
  const key = subkey(secret, 'unsubscribe links')
  return {
    unsubscribeToken: ({ accountId, txid, address }) => sealToken(key, [accountId, txid, address]),
    openUnsubscribeToken: (token) => unsubscribeLinkOf(openToken(key, token)),
  }
}

/**
 * The Store's return-path tokens: `b` and one AES block in lowercase hex, under the secret's
 * `return paths` subkey. The block holds the delivery row's id and 64 bits of a MAC of the return
 * path's domain, so a token opens only at its domain, nobody without the secret can make one, and
 * the id (a count of the server's mail, every tenant's) is not shown. AES on one block of a
 * never-repeated plaintext (each row's id is new) needs no mode: ECB is the block cipher itself.
 */
export function returnPathTokens(secret: Buffer): Pick<Store['queue'], 'returnPathToken' | 'openReturnPathToken'> {
  const key = subkey(secret, 'return paths')
  const tagKey = subkey(secret, 'return path domains')
  const tag = (domain: string) => createHmac('sha256', tagKey).update(domain.toLowerCase()).digest().subarray(0, 8)
  const block = (cipher: ReturnType<typeof createCipheriv>, input: Buffer) => {
    cipher.setAutoPadding(false)
    return Buffer.concat([cipher.update(input), cipher.final()])
  }
  return {
    returnPathToken: (rowId, domain) => {
      const plain = Buffer.alloc(16)
      plain.writeBigUInt64BE(BigInt(rowId))
      tag(domain).copy(plain, 8)
      return `b${block(createCipheriv('aes-256-ecb', key, null), plain).toString('hex')}`
    },
    openReturnPathToken: (local, domain) => {
      const m = /^b([0-9a-f]{32})$/.exec(local.toLowerCase())
      if (!m) return undefined
      const plain = block(createDecipheriv('aes-256-ecb', key, null), Buffer.from(m[1], 'hex'))
      if (!timingSafeEqual(plain.subarray(8), tag(domain))) return undefined
      const id = plain.readBigUInt64BE(0)
      return id <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(id) : undefined
    },
  }
}

export function generatePassword(): string {
  // Rejection sampling keeps every character equally likely.
  let out = ''
  while (out.length < PASSWORD_LENGTH) {
    for (const b of randomBytes(PASSWORD_LENGTH * 2)) {
      if (b < 256 - (256 % PASSWORD_ALPHABET.length) && out.length < PASSWORD_LENGTH)
        out += PASSWORD_ALPHABET[b % PASSWORD_ALPHABET.length]
    }
  }
  return out
}

/** A new API key: `mr_` + 32 random bytes (base64url). Only its hash is stored. */
export function generateApiKey(): string {
  return API_KEY_PREFIX + randomBytes(32).toString('base64url')
}

/**
 * Keys have 256 bits of entropy, so a plain SHA-256 is enough (no slow hash needed). One-shot
 * `hash()`: a `createHash` object per request cost a request about 7 µs more, under load.
 */
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex')
}

/** Whether a credential is written as an API key (`mr_…`), not an OAuth token (`mra_…`, `mrr_…`). */
export const isApiKey = (credential: string): boolean => credential.startsWith(API_KEY_PREFIX)

export function apiKeyPrefix(key: string): string {
  return key.slice(0, API_KEY_PREFIX.length + 6)
}

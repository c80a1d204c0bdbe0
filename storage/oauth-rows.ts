import type { OAuthCode } from './store.js'

/** Scopes as both backends keep them: space-separated, as OAuth writes them. */
export const scopesOf = (text: string): string[] => text.split(' ').filter(Boolean)

/** The values of an `oauth_codes` row, in the order both backends insert them. */
export const codeValues = (hash: string, c: OAuthCode) => [
  hash,
  c.accountId,
  c.clientId,
  c.clientName,
  c.redirectUri,
  c.redirectUriNamed,
  c.codeChallenge,
  c.scopes.join(' '),
  c.resource,
  c.sandbox,
  c.expiresAt,
]

/** The values of the `oauth_grants` row a code makes, in the order both backends insert them (then the times). */
export const grantValues = (c: OAuthCode) => [
  c.accountId,
  c.clientId,
  c.clientName,
  c.scopes.join(' '),
  c.resource,
  c.sandbox,
]

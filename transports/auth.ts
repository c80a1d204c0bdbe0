import type { Context } from 'hono'
import { MailroomError, unauthorized } from '../errors.js'
import { AUTH_FAILURE_WINDOW_MS, authThrottle } from '../relay/auth-throttle.js'
import type { KeyOwner } from '../storage/store.js'
import type { Services } from '../tools/define.js'

/** The account of a request's X-API-KEY and whether it is a sandbox key, or a 401 (or a 429, see keyAuthenticator). */
export type Authenticate = (c: Context) => Promise<KeyOwner>

/**
 * Checks X-API-KEY for REST and MCP alike. Wrong keys are counted per client address (the
 * socket's, or a trusted proxy's X-Forwarded-For, see clientAddress; an IPv6 /64 as one); past
 * MAILROOM_HTTP_MAX_AUTH_FAILURES in the window, every request from there that needs a key is a
 * 429 until the window passes, a right key too, as for SMTP AUTH: else the answers would still
 * tell a right guess from the wrong ones. Each wrong key is logged (never the key), the last one
 * saying that the throttle starts; the 429s are not, so that a flood of guesses cannot flood the log.
 */
export function keyAuthenticator(services: Services): Authenticate {
  const { config, clock, logger, store } = services
  const failures = authThrottle(config.http.maxAuthFailures, clock)
  return async (c) => {
    const ip = c.get('clientIp')
    const wait = Math.ceil(failures.retryAfter(ip) / 1000)
    if (wait > 0) {
      throw new MailroomError(429, `too many wrong API keys from this address: try again in ${wait} s`, {
        headers: { 'Retry-After': String(wait) },
      })
    }
    const key = c.req.header('x-api-key')
    const owner = key ? await store.apiKeys.owner(key.trim()) : undefined
    if (owner !== undefined) return owner
    if (key) {
      failures.fail(ip)
      const refusedFor = Math.ceil(failures.retryAfter(ip) / 1000)
      const line = { req: c.get('requestId'), ip, path: c.req.path }
      if (!refusedFor) logger.warn(line, 'wrong API key')
      else {
        const within = `${config.http.maxAuthFailures} from this address within ${AUTH_FAILURE_WINDOW_MS / 60_000} minutes`
        logger.warn(
          { ...line, retryAfter: refusedFor },
          `wrong API key: ${within}, so its requests are refused (429) for ${refusedFor} s`,
        )
      }
    }
    throw unauthorized()
  }
}

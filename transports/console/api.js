// The REST API as the console calls it: the key from this tab's sessionStorage in X-API-KEY,
// never a cookie (credentials: 'omit'), so that no other site's request can act with it.

const KEY = 'mailroom.key'
const NOTICE = 'mailroom.notice'
const NEXT = 'mailroom.next'
const SIGN_IN = '/console/sign-in'

export const session = {
  key: () => sessionStorage.getItem(KEY),
  /** Keeps the key for this tab only: closing the tab forgets it. */
  keep: (key) => sessionStorage.setItem(KEY, key),
  /** Forgets the key and goes to the sign-in page, which shows `notice` ({text, error}). */
  end(notice) {
    sessionStorage.removeItem(KEY)
    if (notice) sessionStorage.setItem(NOTICE, JSON.stringify(notice))
    if (location.pathname !== SIGN_IN) sessionStorage.setItem(NEXT, location.pathname + location.search)
    location.assign(SIGN_IN)
  },
  /** The notice left for the sign-in page, once. */
  notice() {
    const notice = sessionStorage.getItem(NOTICE)
    sessionStorage.removeItem(NOTICE)
    return notice ? JSON.parse(notice) : null
  },
  /** Where to go once signed in: the page the person was sent away from, if it is the console's. */
  next() {
    const next = sessionStorage.getItem(NEXT)
    sessionStorage.removeItem(NEXT)
    return next?.startsWith('/console') && !next.startsWith('//') ? next : '/console'
  },
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message)
    this.status = status
  }
}

/** Calls the API with `key`; resolves with the JSON answer, or rejects with the API's own message. */
export async function request(method, path, { query = {}, body, key = session.key() } = {}) {
  const url = new URL(path, location.origin)
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, String(value))
  }
  const headers = { Accept: 'application/json', 'X-API-KEY': key ?? '' }
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  let res
  try {
    res = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'omit',
    })
  } catch {
    throw new ApiError(0, 'The server cannot be reached: check the connection and try again.')
  }
  const data = await res.json().catch(() => null)
  if (!res.ok) throw new ApiError(res.status, data?.message ?? `The server answered ${res.status}.`)
  return data
}

/** The API as the signed-in person. A refused key ends the session: back to sign in, saying why. */
export async function api(method, path, options = {}) {
  if (!session.key()) {
    session.end({ text: 'Sign in to use the console.' })
    return new Promise(() => {})
  }
  try {
    return await request(method, path, options)
  } catch (err) {
    if (err.status !== 401) throw err
    session.end({ text: 'The API key was refused (it may have been revoked): sign in again.', error: true })
    return new Promise(() => {})
  }
}

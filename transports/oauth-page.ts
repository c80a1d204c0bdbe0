import { html } from 'hono/html'
import type { Account } from '../storage/store.js'
import { page } from './documents.js'
import type { ClientInfo } from './oauth-clients.js'
import { SCOPES, type Scope } from './scopes.js'

/** The parameters of an authorization request (RFC 6749 §4.1.1, RFC 7636, RFC 8707), carried from step to step. */
export const AUTHORIZE_PARAMS = [
  'response_type',
  'client_id',
  'redirect_uri',
  'code_challenge',
  'code_challenge_method',
  'state',
  'scope',
  'resource',
] as const
export type AuthorizeParams = Partial<Record<(typeof AUTHORIZE_PARAMS)[number], string>>

const hidden = (params: AuthorizeParams) =>
  AUTHORIZE_PARAMS.map((name) =>
    params[name] === undefined ? '' : html`<input type="hidden" name="${name}" value="${params[name]}">`,
  )

const who = (client: ClientInfo) =>
  html`<strong>${client.name ?? client.id}</strong>${client.name ? html` (<code>${client.id}</code>)` : ''}`

const scopeList = (scopes: readonly Scope[]) =>
  html`<ul>${scopes.map((s) => html`<li><code>${s}</code>: ${SCOPES[s]}</li>`)}</ul>`

/**
 * The first step: which client asks, for what, and where it sends the person back; the person
 * signs in with an API key of the account, or denies at once.
 */
export function signInPage(
  client: ClientInfo,
  scopes: readonly Scope[],
  params: AuthorizeParams,
  redirectUri: string,
  problem?: string,
): string {
  return page(
    'Authorize an application: mailroom',
    String(html`<main><h1>Authorize an application</h1>
<p>${who(client)} asks to act for a mailroom account, to:</p>${scopeList(scopes)}
<p>Afterwards you are sent back to <code>${redirectUri}</code>.</p>
${problem ? html`<p role="alert"><strong>${problem}</strong></p>` : ''}
<form method="post" action="/oauth/authorize">${hidden(params)}
<p><label for="api_key">API key of the account</label><br>
<input id="api_key" name="api_key" type="password" autocomplete="off" required autofocus size="50"></p>
<p><button type="submit" name="step" value="sign-in">Continue</button>
<button type="submit" name="decision" value="deny" formnovalidate>Deny</button></p>
</form></main>`),
  )
}

/** The second step: the account the key signed in to, the scopes to allow (each can be left out), allow or deny. */
export function consentPage(
  client: ClientInfo,
  account: Account,
  sandbox: boolean,
  scopes: readonly Scope[],
  params: AuthorizeParams,
  apiKey: string,
): string {
  return page(
    'Authorize an application: mailroom',
    String(html`<main><h1>Allow ${client.name ?? 'this application'}?</h1>
<p>${who(client)} will act for the account <strong>${account.name}</strong> (id ${account.id})${sandbox ? html`, with a <strong>sandbox</strong> key: its mail never leaves the server` : ''}.</p>
<form method="post" action="/oauth/authorize">${hidden(params)}
<input type="hidden" name="api_key" value="${apiKey}">
<fieldset><legend>It may</legend>
${scopes.map((s) => html`<p><input type="checkbox" id="scope-${s}" name="allow_scope" value="${s}" checked> <label for="scope-${s}"><code>${s}</code>: ${SCOPES[s]}</label></p>`)}
</fieldset>
<p>You can revoke it at any time with <code>mailroom account grants --account ${account.id}</code> and <code>mailroom account grant revoke ID</code>.</p>
<p><button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button></p>
</form></main>`),
  )
}

/** An authorization request that cannot go back to its client: why, for the person. */
export function problemPage(message: string): string {
  return page(
    'Cannot authorize: mailroom',
    String(html`<main><h1>This authorization request cannot be answered</h1><p role="alert">${message}</p>
<p>Nothing was granted. Start again from the application.</p></main>`),
  )
}

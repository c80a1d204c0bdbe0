import type { Child, FC } from 'hono/jsx'

// The parts the console's pages are made of (console-pages.tsx).

/** The console's pages: their paths under /console, titles and navigation labels. */
export const PAGES = {
  overview: { path: '/console', title: 'Overview' },
  log: { path: '/console/log', title: 'Log' },
  approvals: { path: '/console/approvals', title: 'Approvals' },
  inbox: { path: '/console/inbox', title: 'Inbox' },
  blocks: { path: '/console/blocks', title: 'Blocks' },
  rules: { path: '/console/rules', title: 'Rules' },
  orders: { path: '/console/orders', title: 'Orders' },
  webhooks: { path: '/console/webhooks', title: 'Webhooks' },
  domains: { path: '/console/domains', title: 'Domains' },
  keys: { path: '/console/keys', title: 'API keys' },
  'sign-in': { path: '/console/sign-in', title: 'Sign in' },
} as const

export type PageName = keyof typeof PAGES

/** How a mail program reaches SMTP submission, as the Orders page shows it. */
export interface Submission {
  host: string
  port: number
  /** The implicit-TLS port, or null when off. */
  securePort: number | null
  authRequiresTls: boolean
}

/** The URL of a console asset (a versioned path: assets are cached for a year). */
export type AssetUrl = (name: string) => string

/** The frame of every page: navigation, sign-out, the alert and status lines. */
export const Layout: FC<{ page: PageName; asset: AssetUrl; children: Child }> = ({ page, asset, children }) => {
  const { title } = PAGES[page]
  const signedIn = page !== 'sign-in'
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${title} · mailroom`}</title>
        <link rel="stylesheet" href={asset('console.css')} />
        <link rel="stylesheet" href={asset('views.css')} />
        <link rel="icon" href={asset('icon.svg')} type="image/svg+xml" />
        <script type="module" src={asset(`${page}.js`)} />
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <span class="brand">mailroom</span>
          {signedIn && (
            <nav aria-label="Console">
              <ul>
                {Object.entries(PAGES)
                  .filter(([name]) => name !== 'sign-in')
                  .map(([name, p]) => (
                    <li>
                      <a href={p.path} aria-current={name === page ? 'page' : undefined}>
                        {p.title}
                      </a>
                    </li>
                  ))}
              </ul>
            </nav>
          )}
          {signedIn && (
            <button type="button" id="sign-out" class="quiet">
              Sign out
            </button>
          )}
        </header>
        {/* A signed-in page is busy until its first load from the API has ended (shell.js). */}
        <main id="main" tabindex={-1} aria-busy={signedIn ? 'true' : undefined}>
          <h1>{title}</h1>
          <div id="alert" class="alert" role="alert" />
          <p id="status" class="status" role="status" />
          {children}
        </main>
      </body>
    </html>
  )
}

export const TextField: FC<{ label: string; name: string; hint?: string; type?: string; required?: boolean }> = (p) => (
  <div class="field">
    <label for={`f-${p.name}`}>{p.label}</label>
    <input
      id={`f-${p.name}`}
      name={p.name}
      type={p.type ?? 'text'}
      placeholder={p.hint}
      required={p.required}
      autocomplete="off"
    />
  </div>
)

/** A checkbox with its label, unchecked. */
export const CheckField: FC<{ label: string; name: string }> = ({ label, name }) => (
  <div class="field checks">
    <label for={`f-${name}`}>
      <input id={`f-${name}`} type="checkbox" name={name} value="1" />
      {` ${label}`}
    </label>
  </div>
)

/** A select; `options` are [value, text] pairs, the first one chosen unless `chosen` says otherwise. */
export const SelectField: FC<{ label: string; name: string; options: [string, string][]; chosen?: string }> = (p) => (
  <div class="field">
    <label for={`f-${p.name}`}>{p.label}</label>
    <select id={`f-${p.name}`} name={p.name}>
      {p.options.map(([value, text]) => (
        <option value={value} selected={value === p.chosen}>
          {text}
        </option>
      ))}
    </select>
  </div>
)

/** Asks before a destructive action; the script fills in what it is about to do. */
export const Confirm: FC = () => (
  <dialog id="confirm" aria-labelledby="confirm-text">
    <form method="dialog">
      <p id="confirm-text" />
      <div class="actions">
        <button type="submit" value="cancel" class="quiet">
          Cancel
        </button>
        <button type="submit" value="ok" id="confirm-ok" class="danger">
          Confirm
        </button>
      </div>
    </form>
  </dialog>
)

/**
 * A table its script fills: the header row, from `columns`; `action` adds a last column for a
 * button per row, named for screen readers only.
 */
export const DataTable: FC<{ id: string; columns: string[]; action?: boolean; caption?: string }> = (p) => (
  <div class="scroll">
    <table id={p.id} class="records">
      {p.caption && <caption class="sr-only">{p.caption}</caption>}
      <thead>
        <tr>
          {p.columns.map((c) => (
            <th scope="col">{c}</th>
          ))}
          {p.action && (
            <th scope="col">
              <span class="sr-only">Action</span>
            </th>
          )}
        </tr>
      </thead>
      <tbody />
    </table>
  </div>
)

/**
 * Newer and Older buttons beside the range of a list shown (`children` before them); `prefix`
 * starts their ids, `${prefix}range`, `${prefix}newer` and `${prefix}older`, and names the pager itself.
 */
export const Pager: FC<{ prefix?: string; hidden?: boolean; children?: Child }> = ({ prefix, hidden, children }) => (
  <div class="pager" id={prefix && `${prefix}pager`} hidden={hidden}>
    {children}
    <span id={`${prefix ?? ''}range`} class="range" aria-live="polite" />
    <button type="button" id={`${prefix ?? ''}newer`} class="quiet">
      Newer
    </button>
    <button type="button" id={`${prefix ?? ''}older`} class="quiet">
      Older
    </button>
  </div>
)

/** A value with a button that copies it (transports/console/shell.js). */
export const Copyable: FC<{ id: string; label: string; what: string; value: string }> = ({
  id,
  label,
  what,
  value,
}) => (
  <div>
    <dt>{label}</dt>
    <dd>
      <code id={id}>{value}</code>{' '}
      <button type="button" class="quiet copy" data-copy={id} aria-label={`Copy ${what}`}>
        Copy
      </button>
    </dd>
  </div>
)

/** A part of a page under its heading, named by it for screen readers. */
export const Section: FC<{ id: string; heading: string; children: Child }> = ({ id, heading, children }) => (
  <section aria-labelledby={`${id}-h`}>
    <h2 id={`${id}-h`}>{heading}</h2>
    {children}
  </section>
)

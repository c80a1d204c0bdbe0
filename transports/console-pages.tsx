import type { FC } from 'hono/jsx'
import type { STATS_WINDOWS } from '../tools/schemas.js'
import {
  type AssetUrl,
  CheckField,
  Confirm,
  Copyable,
  DataTable,
  Layout,
  Pager,
  Section,
  type PageName,
  SelectField,
  type Submission,
  TextField,
} from './console-layout.js'
import { Inbox } from './console-inbox.js'
import { Approvals, Domains, Keys, Reveal, Webhooks } from './console-manage.js'

const INTERVALS: [string, string][] = [
  ['day', 'By day'],
  ['hour', 'By hour'],
]
/** viewMailLog's `delivered`. */
const DELIVERY: [string, string][] = [
  ['', 'Any'],
  ['1', 'Delivered'],
  ['0', 'Not delivered'],
]
const PAGE_SIZES: [string, string][] = ['10', '25', '50', '100'].map((n) => [n, n])
/** addRule's types, in words (the Rules page's table reads them from here too). */
const RULE_TYPES: [string, string][] = [
  ['email', 'Sender address'],
  ['domain', 'Sender domain'],
  ['startswith', 'Sender starts with'],
  ['destination', 'Recipient address'],
]

/** The windows of getStats, the billing cycle first: its answer also gives the usage and cost. */
const WINDOWS: [(typeof STATS_WINDOWS)[number], string][] = [
  ['billing', 'This billing cycle'],
  ['1h', 'Last hour'],
  ['24h', 'Last 24 hours'],
  ['day', 'Today'],
  ['7d', 'Last 7 days'],
  ['month', 'This month'],
  ['all', 'All time'],
]

/** What the server's settings decide of the pages. */
export interface PageSettings {
  smtp: Submission
  /** The operator set a price: the Overview shows the cost. */
  priced: boolean
}

const Overview: FC<{ priced: boolean }> = ({ priced }) => (
  <>
    <Section id="usage" heading="This billing cycle">
      <dl class="figures">
        <div>
          <dt>Messages</dt>
          <dd id="usage">…</dd>
        </div>
        {priced && (
          <div>
            <dt>Cost</dt>
            <dd id="cost">…</dd>
          </div>
        )}
        <div id="sandbox-figure" hidden>
          <dt>Not billed (sandbox mail, reports to senders)</dt>
          <dd id="sandbox">…</dd>
        </div>
      </dl>
    </Section>
    <Section id="volume" heading="Volume">
      <form id="volume-form" class="filters">
        <SelectField label="Interval" name="interval" options={INTERVALS} />
        <TextField label="From" name="startTime" hint="e.g. 7 days ago" />
        <TextField label="To" name="endTime" hint="e.g. now" />
        <button type="submit">Show</button>
      </form>
      <figure class="chart">
        <figcaption id="volume-caption" />
        <div id="volume-chart" />
      </figure>
    </Section>
    <Section id="top" heading="Top destinations and senders">
      <form id="top-form" class="filters">
        <SelectField label="Window" name="time" options={WINDOWS} />
        <button type="submit">Show</button>
      </form>
      <div id="top-summary" />
      <div class="columns">
        <div>
          <h3 id="top-to-h">Destinations</h3>
          <ol id="top-to" class="bars" aria-labelledby="top-to-h" />
        </div>
        <div>
          <h3 id="top-from-h">Senders</h3>
          <ol id="top-from" class="bars" aria-labelledby="top-from-h" />
        </div>
      </div>
    </Section>
  </>
)

const Log: FC = () => (
  <>
    <form id="filters" class="filters">
      <TextField label="Sender" name="from" type="email" />
      <TextField label="Recipient" name="to" type="email" />
      <TextField label="Subject" name="subject" />
      <TextField label="Transaction id" name="mailid" />
      <TextField label="Message-ID" name="messageId" />
      <SelectField label="Delivery" name="delivered" options={DELIVERY} />
      <TextField label="From date" name="startDate" hint="e.g. yesterday" />
      <TextField label="To date" name="endDate" hint="e.g. today" />
      <SelectField label="Order" name="id" options={[['', 'First active']]} />
      <SelectField label="Rows" name="limit" options={PAGE_SIZES} chosen="50" />
      <div class="actions">
        <button type="submit">Search</button>
        <button type="reset" class="quiet">
          Clear
        </button>
      </div>
    </form>
    <Pager>
      <button type="button" id="refresh">
        Refresh
      </button>
    </Pager>
    <DataTable
      id="log"
      columns={['Time (UTC)', 'Sender', 'Recipient', 'Subject', 'Status']}
      caption="Messages, newest first; open one to see its story"
    />
    <dialog id="story" aria-labelledby="story-title">
      <div class="dialog-head">
        <h2 id="story-title">Message</h2>
        <button type="button" id="story-close" class="quiet" aria-label="Close the story">
          Close
        </button>
      </div>
      <div id="story-body" />
    </dialog>
  </>
)

const EventTable: FC<{ id: string; heading: string; about: string }> = ({ id, heading, about }) => (
  <Section id={id} heading={heading}>
    <p>{about}</p>
    <DataTable id={id} columns={['Date', 'Sender', 'Recipient', 'Subject']} action />
  </Section>
)

const Blocks: FC = () => (
  <>
    <Section id="suppressions" heading="Suppressed recipients">
      <p>
        Recipients mail is refused to, newest first: a hard bounce said the mailbox does not exist (the message is
        linked), or the operator suppressed them. Delisting one lets mail reach it again.
      </p>
      <Pager prefix="suppressions-" hidden />
      <DataTable
        id="suppressions"
        columns={['Recipient', 'Since (UTC)', 'Reason', 'Message']}
        action
        caption="Suppressed recipients, newest first"
      />
    </Section>
    <EventTable
      id="local"
      heading="Mail refused to suppressed recipients"
      about="Mail refused to recipients on the local block list, last 5 days. Delisting the recipient lets mail reach it again."
    />
    <EventTable
      id="mbtrap"
      heading="Spam traps"
      about="Mail to spam-trap addresses, last 5 days; the sender is blocked. Delisting the sender lets it send again."
    />
    <Section id="subject" heading="Repeated subjects">
      <p>Senders blocked for repeating a spam-like subject more than 4 times in 3 days.</p>
      <DataTable id="subject" columns={['Sender', 'Subject']} action />
    </Section>
    <Confirm />
  </>
)

const Rules: FC = () => (
  <>
    <Section id="add" heading="Add a rule">
      <form id="add-rule" class="filters">
        <SelectField label="Type" name="type" options={RULE_TYPES} />
        <TextField label="Value" name="data" hint="e.g. spam@example.com" required />
        <SelectField label="Order" name="user" options={[['', 'First active']]} />
        <button type="submit">Add rule</button>
      </form>
    </Section>
    <Section id="rules" heading="Deny rules">
      <p>Mail a rule matches is refused before it is queued.</p>
      <DataTable id="rules" columns={['Id', 'Order', 'Type', 'Value', 'Created (UTC)']} action />
    </Section>
    <Confirm />
  </>
)

const Orders: FC<{ smtp: Submission }> = ({ smtp }) => (
  <>
    <Section id="smtp" heading="SMTP settings">
      <p>
        For a mail program: log in with an order's username and password
        {smtp.authRequiresTls ? ', after STARTTLS (or on the TLS port)' : ''}.
      </p>
      <dl class="settings">
        <Copyable id="smtp-host" label="Host" what="the host" value={smtp.host} />
        <Copyable id="smtp-port" label="Port (STARTTLS)" what="the STARTTLS port" value={String(smtp.port)} />
        {smtp.securePort !== null && (
          <Copyable id="smtp-secure-port" label="Port (TLS)" what="the TLS port" value={String(smtp.securePort)} />
        )}
      </dl>
    </Section>
    <Section id="new-order" heading="Create an order">
      <form id="add-order" class="filters">
        <TextField label="Comment" name="comment" hint="e.g. newsletters" />
        <TextField label="Authorized senders" name="senders" hint="a@example.com, @example.org; empty: any" />
        <CheckField label="Sandbox order: its mail never leaves" name="sandbox" />
        <button type="submit">Create order</button>
      </form>
      <Reveal id="new-order-password" />
    </Section>
    <Section id="orders" heading="Mail orders">
      <ul id="orders" class="cards" />
    </Section>
    <Confirm />
  </>
)

const SignIn: FC = () => (
  <form id="sign-in" class="narrow">
    <p>
      Sign in with an API key. It is kept in this tab only (sessionStorage) and sent with each request as X-API-KEY;
      closing the tab or signing out forgets it.
    </p>
    <TextField label="API key" name="key" type="password" required />
    <button type="submit">Sign in</button>
  </form>
)

/** One page of the console as HTML: a shell its script fills from the API. */
export function renderPage(page: PageName, asset: AssetUrl, { smtp, priced }: PageSettings): string {
  const content = {
    overview: <Overview priced={priced} />,
    log: <Log />,
    approvals: <Approvals />,
    inbox: <Inbox />,
    blocks: <Blocks />,
    rules: <Rules />,
    orders: <Orders smtp={smtp} />,
    webhooks: <Webhooks />,
    domains: <Domains />,
    keys: <Keys />,
    'sign-in': <SignIn />,
  }[page]
  return `<!doctype html>${String(
    <Layout page={page} asset={asset}>
      {content}
    </Layout>,
  )}`
}

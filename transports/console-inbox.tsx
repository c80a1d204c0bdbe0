import type { FC } from 'hono/jsx'
import { CheckField, Confirm, DataTable, Pager, Section, SelectField, TextField } from './console-layout.js'

// The Inbox page: the account's inboxes and the mail they received, a message read with its
// authentication verdict and its conversation (console-pages.tsx has the other pages).

export const Inbox: FC = () => (
  <>
    <Section id="inboxes" heading="Inboxes">
      <p>
        An inbox is an address at a receiving domain (<code>mailroom domain receive</code>) whose mail is kept here for
        agents and for you.
      </p>
      <form id="add-inbox" class="filters">
        <TextField label="Address" name="address" type="email" hint="e.g. support@acme.example" required />
        <button type="submit">Add inbox</button>
      </form>
      <DataTable id="inboxes" columns={['Address', 'Messages', 'Unread', 'Stored', 'Created (UTC)']} action />
    </Section>
    <Section id="received" heading="Received messages">
      <form id="inbound-filters" class="filters">
        <SelectField label="Inbox" name="inbox" options={[['', 'All inboxes']]} />
        <CheckField label="Unread only" name="unread" />
        <button type="submit">Show</button>
      </form>
      <Pager prefix="inbound-" />
      <DataTable
        id="inbound"
        columns={['Received (UTC)', 'From', 'Inbox', 'Subject', 'State']}
        caption="Received messages, newest first; open one to read it"
      />
    </Section>
    <dialog id="message" class="panel" aria-labelledby="message-title">
      <div class="dialog-head">
        <h2 id="message-title">Message</h2>
        <button type="button" id="message-close" class="quiet" aria-label="Close the message">
          Close
        </button>
      </div>
      <div id="message-body" />
    </dialog>
    <Confirm />
  </>
)

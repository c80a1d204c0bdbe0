import type { FC } from 'hono/jsx'
import { WEBHOOK_EVENT_TYPES } from '../storage/store.js'
import { CheckField, Confirm, DataTable, Section, TextField } from './console-layout.js'

// The pages that manage what runs the service: held messages, webhooks, sending domains and API
// keys (console-pages.tsx has the others).

/** Where a secret shown only once appears (its script fills it), announced to screen readers. */
export const Reveal: FC<{ id: string }> = ({ id }) => <div id={id} class="reveal" aria-live="polite" />

/** Checkboxes for a list of values, in a fieldset named by `legend`, all checked at first. */
const Checkboxes: FC<{ legend: string; name: string; values: readonly string[] }> = ({ legend, name, values }) => (
  <fieldset class="field checks">
    <legend>{legend}</legend>
    {values.map((value) => (
      <label for={`f-${name}-${value}`}>
        <input id={`f-${name}-${value}`} type="checkbox" name={name} value={value} checked />
        {` ${value}`}
      </label>
    ))}
  </fieldset>
)

/**
 * Messages a send policy held for a person (docs/approval.md). A held message's approvalUrl is this
 * page with `?id=`: that one is shown first, with its text, never its HTML.
 */
export const Approvals: FC = () => (
  <>
    <div id="focus" hidden>
      <Section id="held" heading="Held message">
        <div id="held" />
      </Section>
    </div>
    <Section id="approvals" heading="Waiting for approval">
      <p>
        Messages an agent's send policy held, newest first. Approving one sends it at once; rejecting it means it is
        never sent. One not decided before its expiry is rejected.
      </p>
      <DataTable
        id="approvals"
        columns={['From', 'To', 'Subject', 'Why', 'Expires (UTC)']}
        action
        caption="Held messages, newest first"
      />
    </Section>
    <Confirm />
  </>
)

export const Webhooks: FC = () => (
  <>
    <Section id="add" heading="Add a webhook">
      <form id="add-webhook" class="filters">
        <TextField label="URL" name="url" type="url" hint="https://example.com/hooks/mail" required />
        <TextField label="Description" name="description" />
        <Checkboxes legend="Events" name="events" values={WEBHOOK_EVENT_TYPES} />
        <button type="submit">Add webhook</button>
      </form>
      <Reveal id="webhook-secret" />
    </Section>
    <Section id="webhooks" heading="Webhooks">
      <p>Each event is posted to each webhook that takes it, signed per Standard Webhooks.</p>
      <DataTable id="webhooks" columns={['Id', 'URL', 'Events', 'Status', 'Last error']} action />
    </Section>
    <Confirm />
  </>
)

export const Domains: FC = () => (
  <>
    <p>
      Mail from a sending domain is signed with its DKIM key. Publish its records at your DNS provider, then check them.
      Sending domains are added by the operator (<code>mailroom domain add</code>).
    </p>
    <ul id="domains" class="cards" />
  </>
)

export const Keys: FC = () => (
  <>
    <Section id="add" heading="Create a key">
      <form id="add-key" class="filters">
        <CheckField label="Sandbox key: what it sends never leaves" name="sandbox" />
        <button type="submit">Create key</button>
      </form>
      <Reveal id="new-key" />
    </Section>
    <Section id="keys" heading="API keys">
      <p>A revoked key is refused from then on, this one too if it signed you in.</p>
      <p>
        A key under a send policy sends within it, may not create keys nor decide held messages (
        <a href="/console/approvals">Approvals</a>); the operator sets policies (
        <code>mailroom account key policy</code>).
      </p>
      <DataTable id="keys" columns={['Id', 'Prefix', 'Kind', 'Policy', 'Created (UTC)', 'Revoked (UTC)']} action />
    </Section>
    <Confirm />
  </>
)

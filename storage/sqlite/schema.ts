import { sql } from 'drizzle-orm'
import { blob, index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core'

// Times are epoch milliseconds unless a column name says otherwise.

export const accounts = sqliteTable('accounts', {
  id: integer('id').primaryKey({ autoIncrement: true }),
  name: text('name').notNull(),
  currency: text('currency').notNull(),
  priceBase: real('price_base').notNull(),
  pricePerMessage: real('price_per_message').notNull(),
  /** Day of the month (1..28) on which a billing cycle starts. */
  billingDay: integer('billing_day').notNull(),
  createdAt: integer('created_at').notNull(),
})

export const apiKeys = sqliteTable(
  'api_keys',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    /** The first characters of the key, shown in listings so a key can be recognised. */
    prefix: text('prefix').notNull(),
    /** SHA-256 of the whole key, hex. The key itself is never stored. */
    hash: text('hash').notNull(),
    createdAt: integer('created_at').notNull(),
    revokedAt: integer('revoked_at'),
    /** A sandbox key: everything it sends is sandbox mail (never leaves the machine). */
    sandbox: integer('sandbox', { mode: 'boolean' }).notNull().default(false),
    /** Its send policy (storage/approval.ts SendPolicy), JSON; null: none, today's behaviour (docs/approval.md). */
    sendPolicy: text('send_policy'),
  },
  (t) => [uniqueIndex('api_keys_hash').on(t.hash), index('api_keys_account').on(t.accountId)],
)

export const mailOrders = sqliteTable(
  'mail_orders',
  {
    // One global sequence: the SMTP username is mb<id>.
    id: integer('id').primaryKey({ autoIncrement: true }),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    status: text('status', { enum: ['active', 'canceled'] }).notNull(),
    comment: text('comment'),
    /** AES-256-GCM with the server secret of the data directory; see storage/secrets.ts. */
    passwordEnc: text('password_enc').notNull(),
    createdAt: integer('created_at').notNull(),
    /** A sandbox order: everything sent with it, whatever the door, is sandbox mail. */
    sandbox: integer('sandbox', { mode: 'boolean' }).notNull().default(false),
    /** A bulk (mailing-list) order: its mail carries a one-click unsubscribe link (RFC 8058). */
    bulk: integer('bulk', { mode: 'boolean' }).notNull().default(false),
    /** Its send policy, JSON, which SMTP submission with it follows; null: none. */
    sendPolicy: text('send_policy'),
  },
  (t) => [index('mail_orders_account').on(t.accountId, t.status)],
)

export const orderSenders = sqliteTable(
  'order_senders',
  {
    orderId: integer('order_id')
      .notNull()
      .references(() => mailOrders.id),
    /** `user@example.com` or `@example.com`, lower case. */
    pattern: text('pattern').notNull(),
  },
  (t) => [primaryKey({ columns: [t.orderId, t.pattern] })],
)

export const denyRules = sqliteTable(
  'deny_rules',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    orderId: integer('order_id')
      .notNull()
      .references(() => mailOrders.id),
    type: text('type', { enum: ['domain', 'email', 'startswith', 'destination'] }).notNull(),
    /** Lower case: rules match case-insensitively. */
    data: text('data').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [uniqueIndex('deny_rules_unique').on(t.orderId, t.type, t.data)],
)

/**
 * One row per accepted message. The log's message-level filters are answered from the
 * (order_id, column) indexes; SQLite appends the rowid to each, so a filtered page comes out
 * already in chronological order.
 */
export const messages = sqliteTable(
  'messages',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    txid: text('txid').notNull(),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    orderId: integer('order_id')
      .notNull()
      .references(() => mailOrders.id),
    envFrom: text('env_from').notNull(),
    headerFrom: text('header_from'),
    replyTo: text('reply_to'),
    subject: text('subject'),
    messageId: text('message_id'),
    origin: text('origin').notNull(),
    transtype: text('transtype').notNull(),
    interface: text('interface').notNull(),
    sendingZone: text('sending_zone').notNull(),
    bodySize: integer('body_size').notNull(),
    /** The envelope recipients, comma-separated (the `to` of groupby=message). */
    rcptTo: text('rcpt_to').notNull(),
    /** How many they are: the log's per-recipient total is summed from the indexes below. */
    rcptCount: integer('rcpt_count').notNull().default(1),
    /** Epoch seconds of acceptance. */
    time: integer('time').notNull(),
    createdAt: integer('created_at').notNull(),
    /** Sandbox mail: its outcomes are recorded without a connection to anyone (relay/sandbox.ts). */
    sandbox: integer('sandbox', { mode: 'boolean' }).notNull().default(false),
  },
  // Each filter index is (order_id, column, id, rcpt_count): walked in id order for a page, and
  // covering for the count (the sum of rcpt_count), so neither touches the table.
  (t) => [
    uniqueIndex('messages_txid').on(t.txid),
    index('messages_order').on(t.orderId),
    index('messages_order_time').on(t.orderId, t.time, t.id, t.rcptCount),
    index('messages_order_from').on(t.orderId, t.envFrom, t.id, t.rcptCount),
    index('messages_order_origin').on(t.orderId, t.origin, t.id, t.rcptCount),
    index('messages_order_subject').on(t.orderId, t.subject, t.id, t.rcptCount),
    index('messages_order_header_from').on(t.orderId, t.headerFrom, t.id, t.rcptCount),
    index('messages_order_reply_to').on(t.orderId, t.replyTo, t.id, t.rcptCount),
    // What a billing cycle does not bill, to take out of its usage, counted from this index alone:
    // sandbox mail, and the reports to senders mailroom writes itself (interface 'report'). It holds
    // the two columns its condition reads, as SQLite tests that condition again on each entry.
    index('messages_unbilled_order_time')
      .on(t.orderId, t.time, t.sandbox, t.interface)
      .where(sql`sandbox = 1 OR interface = 'report'`),
    // The sent message a received reply names (In-Reply-To, References), to put both in one thread.
    index('messages_message_id').on(t.messageId).where(sql`message_id IS NOT NULL`),
  ],
)

/** Rows per order, kept with every enqueue: the log's unfiltered `total` without counting a million rows. */
export const orderCounts = sqliteTable('order_counts', {
  orderId: integer('order_id').primaryKey(),
  messages: integer('messages').notNull(),
  deliveries: integer('deliveries').notNull(),
})

/**
 * The message bytes, apart from the log so that log scans stay small, in parts of at most
 * BODY_PART_SIZE (storage/store.ts): a large message is never copied into SQLite in one piece (see bodyParts).
 */
export const messageBodies = sqliteTable(
  'message_bodies',
  {
    messageId: integer('message_id')
      .notNull()
      .references(() => messages.id),
    part: integer('part').notNull().default(0),
    raw: blob('raw', { mode: 'buffer' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.messageId, t.part] })],
)

/**
 * One row per recipient: the delivery log row (`_id` is its id) and the queue entry the delivery
 * workers claim with a lease.
 */
export const deliveries = sqliteTable(
  'deliveries',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    messageId: integer('message_id')
      .notNull()
      .references(() => messages.id),
    /** The message's order, repeated here so that recipient filters are answered per order from one index. */
    orderId: integer('order_id').notNull(),
    seq: integer('seq').notNull(),
    recipient: text('recipient').notNull(),
    domain: text('domain').notNull(),
    /** queued | deferred | delivered | failed, or held | rejected while and once a person decides (holds). */
    state: text('state', { enum: ['queued', 'deferred', 'delivered', 'failed', 'held', 'rejected'] }).notNull(),
    delivered: integer('delivered').notNull().default(0),
    code: integer('code'),
    response: text('response'),
    mxHostname: text('mx_hostname'),
    locked: integer('locked').notNull().default(0),
    /** Epoch milliseconds of the lease, as text (the contract's type). */
    lockTime: text('lock_time'),
    assigned: text('assigned'),
    attempts: integer('attempts').notNull().default(0),
    /** 1 once the sender was sent a `delayed` report about this recipient: it is sent only once. */
    delayReported: integer('delay_reported').notNull().default(0),
    /** When the row may next be tried (epoch ms); null once final. */
    nextAttemptAt: integer('next_attempt_at'),
    /** ISO 8601 UTC. */
    queued: text('queued').notNull(),
  },
  (t) => [
    uniqueIndex('deliveries_message_seq').on(t.messageId, t.seq),
    index('deliveries_order_recipient').on(t.orderId, t.recipient, t.messageId),
    index('deliveries_order_mx').on(t.orderId, t.mxHostname, t.messageId),
    index('deliveries_order_delivered').on(t.orderId, t.delivered, t.messageId),
    // Whether an account ever sent to a domain (a send policy's new recipients, mail.sentBefore).
    index('deliveries_order_domain').on(t.orderId, t.domain),
    index('deliveries_due').on(t.nextAttemptAt).where(sql`next_attempt_at IS NOT NULL`),
  ],
)

/**
 * Every delivery attempt of a recipient, written in the commit that records its outcome (the
 * delivery row keeps only the last), and the operator's cancel as a failure with no reply. Keyed
 * by delivery row and attempt, without a rowid (a migration's hand-written part): one b-tree,
 * which a message's history reads in order. No foreign key, as for a delivery's message: a row is
 * only written with its delivery's outcome, and log rows are never deleted.
 */
export const deliveryAttempts = sqliteTable(
  'delivery_attempts',
  {
    deliveryId: integer('delivery_id').notNull(),
    /** 1 for the first attempt; a cancel's entry follows the last. */
    attempt: integer('attempt').notNull(),
    time: integer('time').notNull(),
    state: text('state', { enum: ['delivered', 'deferred', 'failed'] }).notNull(),
    code: integer('code'),
    response: text('response'),
    mxHostname: text('mx_hostname'),
    mxAddress: text('mx_address'),
    /** 1 when the connection was encrypted, 0 when not, null without a connection. */
    tls: integer('tls'),
    /** The MTA-STS mode applied (`none`, `testing`, `enforce`); null when no policy was looked up (sandbox, local, smarthost). */
    tlsPolicy: text('tls_policy', { enum: ['none', 'testing', 'enforce'] }),
    /** The domain whose policy it was. */
    tlsPolicyDomain: text('tls_policy_domain'),
    /** 1 when the MX certificate was valid for its name (chain and name), 0 when not, null without TLS. */
    certValid: integer('cert_valid'),
    nextAttemptAt: integer('next_attempt_at'),
    /** 1 when this failure put the recipient on the account's suppression list. */
    suppressed: integer('suppressed').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.deliveryId, t.attempt] })],
)

/**
 * The volume index: counts per mail order and UTC hour, added to in the commits that accept
 * messages (recipients), record attempts and refuse sends, one upsert per order and hour of a
 * commit. getVolume reads only this. Without a rowid, as delivery_attempts.
 */
export const volumeHours = sqliteTable(
  'volume_hours',
  {
    orderId: integer('order_id').notNull(),
    /** The hour's start (epoch ms). */
    hourStart: integer('hour_start').notNull(),
    accepted: integer('accepted').notNull().default(0),
    delivered: integer('delivered').notNull().default(0),
    deferred: integer('deferred').notNull().default(0),
    failed: integer('failed').notNull().default(0),
    refused: integer('refused').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.orderId, t.hourStart] })],
)

/** Store 1 of the blocks: one record per message the spam filter flagged. */
export const blockEvents = sqliteTable(
  'block_events',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    rule: text('rule', { enum: ['LOCAL_BL_RCPT', 'MBTRAP', 'SUBJECT'] }).notNull(),
    envFrom: text('env_from').notNull(),
    messageId: text('message_id'),
    subject: text('subject').notNull().default(''),
    rcptTo: text('rcpt_to').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [
    index('block_events_account').on(t.accountId, t.rule, t.createdAt),
    // A sender's events (delisting), and the count of one repeated subject within its window
    // (the spam filter, at every spam-indicative subject) from a seek.
    index('block_events_from').on(t.accountId, t.envFrom, t.rule, t.subject, t.createdAt),
    index('block_events_created').on(t.createdAt),
  ],
)

/**
 * Stores 2 and 3 of the blocks: `external` = imported from a third-party feed; `internal` =
 * blocked by our own rules or the operator. `kind` says whether the address is blocked as a
 * sender or suppressed as a recipient (the local block list).
 */
export const blockList = sqliteTable(
  'block_list',
  {
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    source: text('source', { enum: ['external', 'internal'] }).notNull(),
    kind: text('kind', { enum: ['sender', 'recipient'] }).notNull(),
    address: text('address').notNull(),
    reason: text('reason').notNull(),
    createdAt: integer('created_at').notNull(),
    /** The transaction id of the message whose bounce put the recipient here; null when nothing did. */
    txid: text('txid'),
  },
  (t) => [
    primaryKey({ columns: [t.accountId, t.address, t.kind, t.source] }),
    // getSuppressions: an account's suppressed recipients, newest first, a page at a time.
    index('block_list_account_kind_created').on(t.accountId, t.kind, t.createdAt),
  ],
)

/** The operator's spam traps, for every account: addresses, or whole domains as `@domain`. */
export const traps = sqliteTable('traps', {
  pattern: text('pattern').primaryKey(),
  createdAt: integer('created_at').notNull(),
})

/**
 * The domains an account signs its mail for (DKIM, RFC 6376). A domain belongs to one account:
 * mail of another account from it is never signed.
 */
export const sendingDomains = sqliteTable(
  'sending_domains',
  {
    /** Lower case, without a trailing dot. */
    domain: text('domain').primaryKey(),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('sending_domains_account').on(t.accountId)],
)

/**
 * A domain's DKIM keys, one per selector. The oldest signs; a newer one (from a rotation) waits
 * until the older ones are removed, so that its DNS record can be published first.
 */
export const dkimKeys = sqliteTable(
  'dkim_keys',
  {
    domain: text('domain')
      .notNull()
      .references(() => sendingDomains.domain, { onDelete: 'cascade' }),
    selector: text('selector').notNull(),
    algorithm: text('algorithm', { enum: ['rsa', 'ed25519'] }).notNull(),
    /** PKCS#8 PEM, AES-256-GCM with the server secret of the data directory; see storage/secrets.ts. */
    privateKeyEnc: text('private_key_enc').notNull(),
    /** The `p=` value of the DNS record. */
    publicKey: text('public_key').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.domain, t.selector] })],
)

/**
 * Idempotency keys of the API's sends (the IETF Idempotency-Key header draft): the first request
 * with a key claims it (pending: `status` null), then its response is kept, so that a retry with
 * the key answers the same and sends nothing. Swept a day after `created_at`.
 */
export const idempotencyKeys = sqliteTable(
  'idempotency_keys',
  {
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    key: text('key').notNull(),
    /** SHA-256 (hex) of the tool and its input: tells a retry from another request under the same key. */
    fingerprint: text('fingerprint').notNull(),
    /** Which request holds the key: a pending entry taken over from a dead request is no longer its to finish. */
    token: text('token').notNull(),
    /** The response's status and body (JSON); null while the request is under way. */
    status: integer('status'),
    body: text('body'),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.key] }), index('idempotency_keys_created').on(t.createdAt)],
)

/**
 * Failed authentications per client (an address, or an IPv6 /64) and door, counted in the database
 * so that every node shares one count (transports/auth.ts): `since` starts the window, and
 * `throttled_until` is set once `count` reaches the limit. A trigger bumps the settings counter
 * when a throttle starts, so that every node's cached answer for the client is dropped.
 */
export const authFailures = sqliteTable(
  'auth_failures',
  {
    client: text('client').primaryKey(),
    count: integer('count').notNull(),
    since: integer('since').notNull(),
    throttledUntil: integer('throttled_until'),
  },
  (t) => [index('auth_failures_since').on(t.since)],
)

/** An account's webhook endpoints (Standard Webhooks): where its message events are posted, signed. */
export const webhooks = sqliteTable(
  'webhooks',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    url: text('url').notNull(),
    /** The event types it takes, comma-separated (`message.delivered,message.failed`). */
    events: text('events').notNull(),
    description: text('description'),
    /** The signing secret (`whsec_…`), AES-256-GCM with the server secret; see storage/secrets.ts. */
    secretEnc: text('secret_enc').notNull(),
    createdAt: integer('created_at').notNull(),
    /** Since when every attempt failed; null once one succeeds. */
    failingSince: integer('failing_since'),
    lastError: text('last_error'),
    lastErrorAt: integer('last_error_at'),
    /** Set when it failed for too long: it gets no more events. */
    disabledAt: integer('disabled_at'),
  },
  (t) => [index('webhooks_account').on(t.accountId)],
)

/**
 * Events waiting to be posted to a webhook (the outbox), written in the transaction of the change
 * they report and leased to a worker like deliveries. A row goes once its endpoint took it, or
 * once its retries ran out.
 */
export const webhookOutbox = sqliteTable(
  'webhook_outbox',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    webhookId: integer('webhook_id')
      .notNull()
      .references(() => webhooks.id, { onDelete: 'cascade' }),
    /** The `webhook-id` header: the same on every attempt, and for every endpoint of the event. */
    eventId: text('event_id').notNull(),
    type: text('type').notNull(),
    /** The JSON body, as signed. */
    payload: text('payload').notNull(),
    createdAt: integer('created_at').notNull(),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: integer('next_attempt_at').notNull(),
    locked: integer('locked').notNull().default(0),
    lockTime: integer('lock_time'),
    assigned: text('assigned'),
  },
  (t) => [index('webhook_outbox_due').on(t.nextAttemptAt), index('webhook_outbox_webhook').on(t.webhookId)],
)

/** Clients registered by OAuth Dynamic Client Registration (RFC 7591); Client ID Metadata Document clients are fetched, not kept. */
export const oauthClients = sqliteTable(
  'oauth_clients',
  {
    id: text('id').primaryKey(),
    name: text('name'),
    /** JSON array of the exact redirect URIs. */
    redirectUris: text('redirect_uris').notNull(),
    registeredFrom: text('registered_from').notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [
    index('oauth_clients_from').on(t.registeredFrom, t.createdAt),
    index('oauth_clients_created').on(t.createdAt),
  ],
)

/** An account's authorization of a client; its tokens go with it. */
export const oauthGrants = sqliteTable(
  'oauth_grants',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    clientId: text('client_id').notNull(),
    clientName: text('client_name'),
    /** Space-separated, as OAuth writes them. */
    scopes: text('scopes').notNull(),
    resource: text('resource').notNull(),
    sandbox: integer('sandbox', { mode: 'boolean' }).notNull().default(false),
    /** The send policy of the key that authorized it, JSON; null: none. */
    sendPolicy: text('send_policy'),
    createdAt: integer('created_at').notNull(),
    refreshedAt: integer('refreshed_at').notNull(),
  },
  (t) => [index('oauth_grants_account').on(t.accountId), index('oauth_grants_client').on(t.clientId)],
)

/** Authorization codes by their SHA-256: taken once; a used one is kept until it expires, to revoke its grant if it comes back. */
export const oauthCodes = sqliteTable(
  'oauth_codes',
  {
    hash: text('hash').primaryKey(),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    clientId: text('client_id').notNull(),
    clientName: text('client_name'),
    redirectUri: text('redirect_uri').notNull(),
    /** Whether the authorization request named it (RFC 6749 §4.1.3: the token request must then name it too). */
    redirectUriNamed: integer('redirect_uri_named', { mode: 'boolean' }).notNull().default(false),
    codeChallenge: text('code_challenge').notNull(),
    scopes: text('scopes').notNull(),
    resource: text('resource').notNull(),
    sandbox: integer('sandbox', { mode: 'boolean' }).notNull().default(false),
    /** The authorizing key's send policy, JSON, carried into the grant. */
    sendPolicy: text('send_policy'),
    expiresAt: integer('expires_at').notNull(),
    usedAt: integer('used_at'),
    /** The grant made from it (set once exchanged). */
    grantId: integer('grant_id'),
  },
  (t) => [index('oauth_codes_expires').on(t.expiresAt)],
)

/** Access and refresh tokens by their SHA-256; a spent refresh token is kept until it expires, to catch its reuse. */
export const oauthTokens = sqliteTable(
  'oauth_tokens',
  {
    hash: text('hash').primaryKey(),
    grantId: integer('grant_id')
      .notNull()
      .references(() => oauthGrants.id, { onDelete: 'cascade' }),
    kind: text('kind', { enum: ['access', 'refresh'] }).notNull(),
    expiresAt: integer('expires_at').notNull(),
    usedAt: integer('used_at'),
  },
  (t) => [index('oauth_tokens_grant').on(t.grantId), index('oauth_tokens_expires').on(t.expiresAt)],
)

/**
 * MCP sessions (Streamable HTTP), here rather than in a node's memory so that every node serves
 * every session: ended by DELETE, by the account opening more than it may keep, or swept once idle.
 */
export const mcpSessions = sqliteTable(
  'mcp_sessions',
  {
    /** The Mcp-Session-Id, a random UUID. */
    id: text('id').primaryKey(),
    /** The account that opened it, the only one that may use it. */
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    /** When it was last used, to the minute (transports/mcp-http.ts). */
    usedAt: integer('used_at').notNull(),
    /** The elicitation modes its client declared at initialize: 'form', 'url' or 'form,url'; null: none. */
    elicitation: text('elicitation'),
  },
  (t) => [index('mcp_sessions_account').on(t.accountId, t.usedAt), index('mcp_sessions_used').on(t.usedAt)],
)

/**
 * The `mailroom serve` processes on this database, each renewing its row while it runs
 * (Store['servers']): `mailroom stdio` delivers itself only when none does.
 */
export const servers = sqliteTable(
  'servers',
  {
    /** Random, new at each start of the process. */
    id: text('id').primaryKey(),
    node: text('node').notNull(),
    url: text('url').notNull(),
    /** Where it delivers, in words. */
    delivery: text('delivery').notNull(),
    /** Its last heartbeat. */
    beatAt: integer('beat_at').notNull(),
  },
  (t) => [index('servers_beat').on(t.beatAt)],
)

/**
 * Sending domains that also receive (issue #37): mail to their inboxes is taken by the MX door.
 * Going with the domain when it is removed; turning receiving off deletes the row and keeps the inboxes.
 */
export const receivingDomains = sqliteTable(
  'receiving_domains',
  {
    domain: text('domain')
      .primaryKey()
      .references(() => sendingDomains.domain, { onDelete: 'cascade' }),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    /** Every address at the domain is an inbox, made at its first message. */
    catchAll: integer('catch_all', { mode: 'boolean' }).notNull().default(false),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [index('receiving_domains_account').on(t.accountId)],
)

/** Addresses at receiving domains that keep what they receive. */
export const inboxes = sqliteTable(
  'inboxes',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    /** Lower case. */
    address: text('address').notNull(),
    domain: text('domain').notNull(),
    createdAt: integer('created_at').notNull(),
    /** The bytes of its messages, kept with each one stored and deleted: what the quota is checked against at RCPT. */
    storedBytes: integer('stored_bytes').notNull().default(0),
  },
  (t) => [uniqueIndex('inboxes_address').on(t.address), index('inboxes_account').on(t.accountId)],
)

/**
 * Received messages, one row per inbox they were received for, with what an agent reads parsed
 * once at intake; their bytes are in inbound_bodies. Deleted after MAILROOM_INBOUND_RETENTION.
 */
export const inboundMessages = sqliteTable(
  'inbound_messages',
  {
    /** `in_` and hex. */
    id: text('id').primaryKey(),
    accountId: integer('account_id')
      .notNull()
      .references(() => accounts.id),
    inboxId: integer('inbox_id')
      .notNull()
      .references(() => inboxes.id, { onDelete: 'cascade' }),
    /** `th_` and hex: the thread of the message it answers, or a new one. */
    threadId: text('thread_id').notNull(),
    /** The Message-ID header, without < >. */
    messageId: text('message_id'),
    inReplyTo: text('in_reply_to'),
    mailFrom: text('mail_from').notNull(),
    remoteAddress: text('remote_address').notNull(),
    receivedAt: integer('received_at').notNull(),
    /** The From header's address, lower case, and its display name. */
    fromAddress: text('from_address'),
    fromName: text('from_name'),
    subject: text('subject'),
    text: text('text'),
    html: text('html'),
    extractedText: text('extracted_text'),
    /** JSON: to, cc, replyTo, date, references, attachments, automatic (storage/inbound.ts InboundMeta). */
    meta: text('meta').notNull(),
    /** JSON: the authentication verdict (AuthVerdict). */
    auth: text('auth').notNull(),
    size: integer('size').notNull(),
    read: integer('read', { mode: 'boolean' }).notNull().default(false),
  },
  (t) => [
    index('inbound_messages_account_received').on(t.accountId, t.receivedAt),
    index('inbound_messages_inbox_received').on(t.inboxId, t.receivedAt),
    index('inbound_messages_thread').on(t.accountId, t.threadId, t.receivedAt),
    index('inbound_messages_message_id').on(t.accountId, t.messageId),
    index('inbound_messages_received').on(t.receivedAt),
  ],
)

/** A received message's bytes, whole, in parts as message_bodies keeps a sent one's. */
export const inboundBodies = sqliteTable(
  'inbound_bodies',
  {
    messageId: text('message_id')
      .notNull()
      .references(() => inboundMessages.id, { onDelete: 'cascade' }),
    part: integer('part').notNull(),
    raw: blob('raw', { mode: 'buffer' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.messageId, t.part] })],
)

/** Sent messages in threads: those a received message answered, and those a reply tool put there. */
export const sentThreads = sqliteTable(
  'sent_threads',
  {
    /** The messages row. */
    messageRowId: integer('message_row_id').primaryKey(),
    accountId: integer('account_id').notNull(),
    threadId: text('thread_id').notNull(),
  },
  (t) => [index('sent_threads_thread').on(t.accountId, t.threadId)],
)

/**
 * Sends counted per send policy holder (storage/approval.ts holderKey) and fixed UTC window, the
 * hour and the day, for maxPerHour and maxPerDay: one upsert that stops at the limit counts a send
 * atomically across nodes. Swept two days on.
 */
export const sendCounts = sqliteTable(
  'send_counts',
  {
    holder: text('holder').notNull(),
    period: text('period', { enum: ['hour', 'day'] }).notNull(),
    /** The window's start. */
    start: integer('start').notNull(),
    count: integer('count').notNull(),
  },
  (t) => [primaryKey({ columns: [t.holder, t.period, t.start] })],
)

/**
 * Messages held for a person's approval (docs/approval.md), one row per message, kept once decided
 * as its story. The message and its delivery rows are stored at once, `held` and never due, so
 * the queue does not see them until approval makes them due.
 */
export const holds = sqliteTable(
  'holds',
  {
    /** The message's transaction id. */
    txid: text('txid').primaryKey(),
    /** The messages row. */
    messageRowId: integer('message_row_id').notNull(),
    accountId: integer('account_id').notNull(),
    orderId: integer('order_id').notNull(),
    /** holderKey of the policy that held it (`key:3`), and in words. */
    holder: text('holder').notNull(),
    holderLabel: text('holder_label').notNull(),
    reason: text('reason').notNull(),
    status: text('status', { enum: ['held', 'approved', 'rejected'] }).notNull(),
    createdAt: integer('created_at').notNull(),
    expiresAt: integer('expires_at').notNull(),
    decidedAt: integer('decided_at'),
    decidedBy: text('decided_by'),
    approvalUrl: text('approval_url').notNull(),
    /** The elicitation asking the person at the MCP client, answered on whichever node it lands. */
    elicitationId: text('elicitation_id'),
    elicitationState: text('elicitation_state', { enum: ['asked', 'cancelled'] }),
  },
  (t) => [
    uniqueIndex('holds_message').on(t.messageRowId),
    uniqueIndex('holds_elicitation').on(t.elicitationId),
    index('holds_account').on(t.accountId, t.status, t.createdAt),
    // The expiry sweep reads only the holds still waiting.
    index('holds_expires').on(t.expiresAt).where(sql`status = 'held'`),
  ],
)

/**
 * MTA-STS policies (RFC 8461) as fetched, one per policy domain, shared by every node: a policy
 * is used until it expires (its max_age), and fetched again when the domain's TXT id changes.
 */
export const stsPolicies = sqliteTable('sts_policies', {
  domain: text('domain').primaryKey(),
  /** The `id` of the `_mta-sts` TXT record it was fetched under. */
  policyId: text('policy_id').notNull(),
  mode: text('mode', { enum: ['none', 'testing', 'enforce'] }).notNull(),
  /** The `mx` patterns, as a JSON array. */
  mx: text('mx').notNull(),
  /** Seconds. */
  maxAge: integer('max_age').notNull(),
  /** The policy file's text: what a TLS report quotes (RFC 8460 §4.3, policy-string). */
  text: text('text').notNull(),
  fetchedAt: integer('fetched_at').notNull(),
  expiresAt: integer('expires_at').notNull(),
})

/**
 * TLS-RPT counts (RFC 8460): sessions per policy domain and UTC day, by policy type, result
 * (`success`, or a failure's result type) and receiving MX host, added to atomically by every node.
 */
export const tlsResultCounts = sqliteTable(
  'tls_result_counts',
  {
    domain: text('domain').notNull(),
    /** The UTC day's start. */
    day: integer('day').notNull(),
    policyType: text('policy_type').notNull(),
    resultType: text('result_type').notNull(),
    /** The receiving MX host; '' when none. */
    mxHost: text('mx_host').notNull(),
    count: integer('count').notNull(),
  },
  (t) => [primaryKey({ columns: [t.domain, t.day, t.policyType, t.resultType, t.mxHost] })],
)

/** The TLS reports claimed, one per policy domain and day: whichever node claims it first sends it. */
export const tlsReports = sqliteTable(
  'tls_reports',
  {
    domain: text('domain').notNull(),
    day: integer('day').notNull(),
    node: text('node').notNull(),
    claimedAt: integer('claimed_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.domain, t.day] }), index('tls_reports_day').on(t.day)],
)

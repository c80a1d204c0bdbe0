import { expect } from 'vitest'
import type { z } from 'zod'
import { MailroomError } from '../../errors.js'
import type { LogQuery, LogRow } from '../../storage/store.js'
import type { Tool, ToolContext } from '../../tools/define.js'
import type { TestEnv } from '../helpers.js'

/** What every transport does: the raw input through the tool's schema, then the handler. */
export async function run<I extends z.ZodObject, O extends z.ZodType>(
  tool: Tool<I, O>,
  raw: Record<string, unknown>,
  ctx: ToolContext,
): Promise<z.input<O>> {
  return tool.handler(tool.input.parse(raw), ctx)
}

/** The call is refused with a MailroomError of `code` whose message matches `fragment`. */
export async function expectRefused(
  call: Promise<unknown>,
  code: number,
  fragment: string | RegExp,
): Promise<MailroomError> {
  const err = await call.then(
    (value) => {
      throw new Error(`expected a ${code} refusal, the call succeeded with ${JSON.stringify(value)}`)
    },
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(MailroomError)
  const e = err as MailroomError
  expect({ code: e.code, message: e.message }).toEqual({ code, message: expect.stringMatching(fragment) })
  return e
}

/** The tool's schema refuses the input, with an issue at `path` (dot-joined). Transports answer these with 400. */
export function expectSchemaRefusal(
  tool: Tool<z.ZodObject, z.ZodType>,
  raw: Record<string, unknown>,
  path: string,
): void {
  const result = tool.input.safeParse(raw)
  expect(result.success, `schema accepted ${JSON.stringify(raw)}`).toBe(false)
  expect(result.error!.issues.map((i) => i.path.join('.'))).toContain(path)
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const sqliteOf = (env: TestEnv) => (env.services.store as any).sqlite as import('better-sqlite3').Database

/** Counts of everything a send stores, over all accounts and orders. */
export function storedCounts(env: TestEnv): { messages: number; bodies: number; deliveries: number } {
  const db = sqliteOf(env)
  const n = (table: string) => (db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n
  return { messages: n('messages'), bodies: n('message_bodies'), deliveries: n('deliveries') }
}

export function expectNothingQueued(env: TestEnv): void {
  expect(storedCounts(env)).toEqual({ messages: 0, bodies: 0, deliveries: 0 })
}

/** The stored bytes of the message with this transaction id. */
export function storedRaw(env: TestEnv, txid: string): Buffer {
  const row = sqliteOf(env)
    .prepare('SELECT b.raw FROM message_bodies b JOIN messages m ON m.id = b.message_id WHERE m.txid = ?')
    .get(txid) as { raw: Buffer } | undefined
  if (!row) throw new Error(`no stored message ${txid}`)
  return row.raw
}

/** The header block of a message, folded lines joined. */
export function headerBlock(raw: Buffer | string): string {
  const text = raw.toString()
  const end = text.search(/\r?\n\r?\n/)
  return (end < 0 ? text : text.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ')
}

/** Every value of a header (case-insensitive name) in the header block. */
export function headerValues(raw: Buffer | string, name: string): string[] {
  return headerBlock(raw)
    .split(/\r?\n/)
    .filter((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`))
    .map((line) => line.slice(name.length + 1).trim())
}

/** The log of the env's first order through the store, oldest first. */
export async function logRows(env: TestEnv, query: Partial<LogQuery> = {}): Promise<{ total: number; rows: LogRow[] }> {
  return env.services.store.mail.log({
    orderId: env.orderId,
    skip: 0,
    limit: 1000,
    dir: 'asc',
    groupby: 'recipient',
    ...query,
  })
}

/** Marks one recipient's delivery of a message as attempted, as the delivery worker would. */
export function setDelivery(
  env: TestEnv,
  txid: string,
  recipient: string,
  fields: { delivered: 0 | 1; mx: string; code?: number; response?: string },
): void {
  const res = sqliteOf(env)
    .prepare(
      `UPDATE deliveries SET delivered = ?, mx_hostname = ?, code = ?, response = ?, state = ?
       WHERE recipient = ? AND message_id = (SELECT id FROM messages WHERE txid = ?)`,
    )
    .run(
      fields.delivered,
      fields.mx,
      fields.code ?? 250,
      fields.response ?? '250 2.0.0 OK',
      fields.delivered ? 'delivered' : 'deferred',
      recipient,
      txid,
    )
  if (res.changes !== 1) throw new Error(`no delivery of ${txid} to ${recipient}`)
}

export function sql(env: TestEnv) {
  return sqliteOf(env)
}

/** A second order of the env's account. */
export async function addOrder(
  env: TestEnv,
  options: { comment?: string | null; senders?: string[]; sandbox?: boolean } = {},
) {
  return env.services.store.orders.create({
    accountId: env.accountId,
    comment: options.comment ?? null,
    senders: options.senders ?? [],
    now: env.clock(),
    sandbox: options.sandbox,
  })
}

export const TXID = /^[0-9a-f]{18}$/

/**
 * RFC 5321 §4.1.2: a quoted-pair stands for its character. Each case is a recipient that one of
 * blockRecipients' blocks refuses, the same mailbox spelled with escapes, and the refusal of the
 * plain spelling (which names the address as the relay keeps it).
 */
export const ESCAPED_RECIPIENTS = [
  {
    block: 'a destination rule',
    plain: 'deny@dest.test',
    escaped: '"de\\ny"@dest.test',
    refusal: /recipient deny@dest\.test is rejected by deny rule \d+ \(destination deny@dest\.test\)/,
  },
  {
    block: 'a spam trap',
    plain: 'trap@trap.test',
    escaped: '"t\\rap"@trap.test',
    refusal: /recipient trap@trap\.test is a spam trap/,
  },
  {
    block: 'the local block list',
    plain: 'gone@a.test',
    escaped: '"g\\one"@a.test',
    refusal: /recipient gone@a\.test is on this account's local block list/,
  },
]

/** A destination rule, a spam trap and a suppressed recipient: the blocks of ESCAPED_RECIPIENTS. */
export async function blockRecipients(env: TestEnv): Promise<void> {
  const { store } = env.services
  await store.rules.create({ orderId: env.orderId, type: 'destination', data: 'deny@dest.test', now: env.clock() })
  await store.traps.add('trap@trap.test', env.clock())
  await store.blocks.addToList({
    accountId: env.accountId,
    source: 'internal',
    kind: 'recipient',
    address: 'gone@a.test',
    reason: 'suppressed by the operator',
    now: env.clock(),
  })
}

import { badInput, type MailroomError } from '../errors.js'

/**
 * The tools by purpose, for an agent that needs only some of them (`/mcp?tools=send,log`,
 * `mailroom stdio --tools send,log`): every tool listed costs each request of the agent's model
 * its description and schemas. Every tool is in one set (a test holds the table to the registry,
 * which this module does not load: the CLI reads it at start); pingServer, the check of the
 * connection, is served whatever was asked.
 */
export const TOOLSETS: Readonly<Record<string, readonly string[]>> = {
  send: ['sendMail', 'sendAdvMail', 'rawMail'],
  log: ['viewMailLog', 'getMessage', 'getMessageContent'],
  stats: ['getStats', 'getVolume'],
  orders: ['getMailOrders', 'getMailOrderById', 'rotateOrderPassword', 'createMailOrder', 'cancelMailOrder'],
  rules: ['getRules', 'addRule', 'deleteRule'],
  blocks: ['getMailBlocks', 'delistBlock', 'getSuppressions'],
  keys: ['getApiKeys', 'createApiKey', 'revokeApiKey'],
  domains: ['getDomains', 'checkDomain'],
  webhooks: ['addWebhook', 'getWebhooks', 'deleteWebhook'],
  inbox: [
    'setDomainReceiving',
    'addInbox',
    'getInboxes',
    'deleteInbox',
    'listInboundMessages',
    'getInboundMessage',
    'getAttachment',
    'getThread',
    'markInboundRead',
    'replyToMessage',
  ],
  approvals: ['getSendPolicy', 'getApprovals', 'approveMessage', 'rejectMessage'],
}
export const ALWAYS_SERVED = ['pingServer']

/** The tools a connection serves: those of the toolsets and tools it asked for, as asked. */
export interface Toolset {
  asked: string
  names: ReadonlySet<string>
}

const TOOL_NAMES = new Map([...Object.values(TOOLSETS).flat(), ...ALWAYS_SERVED].map((n) => [n.toLowerCase(), n]))

/**
 * The toolset of a comma-separated list of toolset names and tool names (any case); undefined for
 * a list that names nothing (every tool). A name that is neither is a 400 listing the toolsets.
 */
export function parseToolset(asked: string, field = 'tools'): Toolset | undefined {
  const items = asked
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  if (!items.length) return undefined
  const names = new Set(ALWAYS_SERVED)
  for (const item of items) {
    const set = TOOLSETS[item.toLowerCase()]
    const tool = TOOL_NAMES.get(item.toLowerCase())
    if (!set && !tool)
      throw badInput(
        `${field}: no toolset or tool named ${item}; the toolsets are ${Object.keys(TOOLSETS).join(', ')}, or name tools (sendMail, …)`,
      )
    for (const name of set ?? [tool!]) names.add(name)
  }
  return { asked: items.join(','), names }
}

/** Whether a connection with `toolset` (undefined: every tool) serves the tool. */
export const serves = (toolset: Toolset | undefined, name: string): boolean => !toolset || toolset.names.has(name)

/** The refusal of a call to a tool the connection does not serve: as an unknown tool, saying where it is. */
export function notServed(toolset: Toolset, name: string): MailroomError {
  const set = Object.keys(TOOLSETS).find((s) => TOOLSETS[s].includes(name))
  return badInput(
    `name: no tool named ${name} in the tools this connection asked for (${toolset.asked}); ` +
      `it is in the ${set} toolset: connect with it in tools, or without tools for every tool`,
  )
}

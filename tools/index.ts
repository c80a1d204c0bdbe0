import type { AnyTool } from './define.js'
import { addRule } from './add-rule.js'
import { addWebhook } from './add-webhook.js'
import { cancelMailOrder } from './cancel-mail-order.js'
import { checkDomain } from './check-domain.js'
import { createApiKey } from './create-api-key.js'
import { createMailOrder } from './create-mail-order.js'
import { deleteRule } from './delete-rule.js'
import { deleteWebhook } from './delete-webhook.js'
import { delistBlock } from './delist-block.js'
import { getApiKeys } from './get-api-keys.js'
import { getDomains } from './get-domains.js'
import { getMailBlocks } from './get-mail-blocks.js'
import { getMailOrderById } from './get-mail-order-by-id.js'
import { getMailOrders } from './get-mail-orders.js'
import { getMessageContent } from './get-message-content.js'
import { getMessage } from './get-message.js'
import { getRules } from './get-rules.js'
import { getSuppressions } from './get-suppressions.js'
import { getStats } from './get-stats.js'
import { getVolume } from './get-volume.js'
import { getWebhooks } from './get-webhooks.js'
import { pingServer } from './ping-server.js'
import { rawMail } from './raw-mail.js'
import { revokeApiKey } from './revoke-api-key.js'
import { rotateOrderPassword } from './rotate-order-password.js'
import { sendAdvMail } from './send-adv-mail.js'
import { sendMail } from './send-mail.js'
import { viewMailLog } from './view-mail-log.js'
import { addInbox } from './add-inbox.js'
import { deleteInbox } from './delete-inbox.js'
import { getAttachment } from './get-attachment.js'
import { getInboundMessage } from './get-inbound-message.js'
import { getInboxes } from './get-inboxes.js'
import { getThread } from './get-thread.js'
import { listInboundMessages } from './list-inbound-messages.js'
import { markInboundRead } from './mark-inbound-read.js'
import { replyToMessage } from './reply-to-message.js'
import { setDomainReceiving } from './set-domain-receiving.js'
import { approveMessage } from './approve-message.js'
import { getApprovals } from './get-approvals.js'
import { getSendPolicy } from './get-send-policy.js'
import { rejectMessage } from './reject-message.js'

/** Every operation of mailroom. REST routes, MCP tools and documents are all derived from this list. */
export const TOOLS: readonly AnyTool[] = [
  pingServer,
  getMailOrders,
  getMailOrderById,
  sendMail,
  sendAdvMail,
  rawMail,
  viewMailLog,
  getStats,
  getMailBlocks,
  delistBlock,
  getRules,
  addRule,
  deleteRule,
  // Extensions beyond the hosted service's contract.
  addWebhook,
  getWebhooks,
  deleteWebhook,
  getMessage,
  getVolume,
  rotateOrderPassword,
  getSuppressions,
  createMailOrder,
  cancelMailOrder,
  getApiKeys,
  createApiKey,
  revokeApiKey,
  getDomains,
  checkDomain,
  getMessageContent,
  // Received mail (docs/inbound.md).
  setDomainReceiving,
  addInbox,
  getInboxes,
  deleteInbox,
  listInboundMessages,
  getInboundMessage,
  getAttachment,
  getThread,
  markInboundRead,
  replyToMessage,
  // Send policies and messages held for a person's approval (docs/approval.md).
  getSendPolicy,
  getApprovals,
  approveMessage,
  rejectMessage,
]

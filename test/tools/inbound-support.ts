import MailComposer from 'nodemailer/lib/mail-composer/index.js'
import { addInbox } from '../../tools/add-inbox.js'
import { setDomainReceiving } from '../../tools/set-domain-receiving.js'
import { ed25519 } from '../storage/contract/fixture.js'
import type { TestEnv } from '../helpers.js'
import { run } from './support.js'

/** A real message with one attachment, as a mail client would send it. */
export async function messageWithAttachment(content: Buffer | string = 'hello, attached'): Promise<Buffer> {
  return new MailComposer({
    from: 'Alice <alice@remote.example>',
    to: 'agent@in.example',
    subject: 'Quote',
    text: 'See attached',
    attachments: [{ filename: 'quote.txt', content, contentType: 'text/plain' }],
  })
    .compile()
    .build()
}

/** The env's account sends from and receives at in.example, with the inbox agent@in.example. */
export async function receivingAccount(env: TestEnv, catchAll = false) {
  const { store } = env.services
  await store.domains.addKey({
    domain: 'in.example',
    accountId: env.accountId,
    selector: 's1',
    algorithm: 'ed25519',
    ...ed25519(),
    now: env.clock(),
  })
  await run(setDomainReceiving, { domain: 'in.example', catchAll }, env.ctx)
  return run(addInbox, { address: 'agent@in.example' }, env.ctx)
}

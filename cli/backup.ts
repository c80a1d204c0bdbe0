import type { Command } from 'commander'
import { join, resolve } from 'node:path'
import { SECRET_FILE } from '../storage/secrets.js'
import { adminAction } from './common.js'

const SECRET_VARIABLE = 'MAILROOM_SECRET_KEY'

/** `backup <file>`: a consistent copy of the database, taken while the server runs. */
export function addBackupCommand(program: Command): void {
  adminAction(
    program
      .command('backup')
      .description(
        'Copy the database, consistently, while the server runs; the secret.key of the data directory (or MAILROOM_SECRET_KEY) must be kept with it',
      )
      .argument('<file>', 'the copy to write (a file that exists is refused)'),
    async (rt, _o, file: string) => {
      const copy = resolve(file)
      await rt.store.backup(copy)
      // A key given in the environment is not in the data directory: the reminder names where it is.
      const secret = rt.config.secretKey ? SECRET_VARIABLE : join(resolve(rt.config.dataDir), SECRET_FILE)
      return { backup: copy, secret }
    },
    (r) =>
      [
        `database copied to ${r.backup}`,
        `Keep ${r.secret === SECRET_VARIABLE ? `the value of ${SECRET_VARIABLE} (the key is in the environment, not in the data directory)` : r.secret} with it: it encrypts the order passwords, which cannot be read from the copy without it.`,
      ].join('\n'),
  )
}

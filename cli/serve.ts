import { InvalidArgumentError, type Command } from 'commander'
import { parseToolset, TOOLSETS } from '../transports/toolsets.js'

const toolsetOption = (value: string) => {
  try {
    return parseToolset(value, '--tools')
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message)
  }
}

/** `serve` and `stdio`: the commands that run mailroom rather than administer it. */
export function addServeCommands(program: Command): void {
  program
    .command('serve')
    .description(
      'Run the service: REST and MCP on MAILROOM_HTTP_PORT, SMTP submission on MAILROOM_SMTP_PORT (STARTTLS) and MAILROOM_SMTPS_PORT (TLS), and delivery',
    )
    .option(
      '--sink',
      'deliver every message to a sink of its own, which prints it on stdout: nothing leaves this machine (what npm start runs, to try mailroom)',
    )
    .action(async (o: { sink?: boolean }) => {
      // Each command loads what it runs when it runs: `mailroom --help` and the admin commands start fast.
      const [{ loadConfig }, { startServer }] = await Promise.all([import('../config.js'), import('../serve.js')])
      const running = await startServer(loadConfig(), { sink: o.sink })
      if (running.firstStart) process.stdout.write(`${running.firstStart}\n`)
      const stop = () => void running.stop().then(() => process.exit(0))
      process.once('SIGINT', stop)
      process.once('SIGTERM', stop)
    })

  program
    .command('stdio')
    .description('Serve the tools over MCP on stdin/stdout for a desktop assistant, as the account of MAILROOM_API_KEY')
    .option('--url <url>', 'act as a client of a remote mailroom at this address instead of the local data directory')
    .option(
      '--tools <list>',
      `serve only these toolsets or tools, comma-separated (toolsets: ${Object.keys(TOOLSETS).join(', ')})`,
      toolsetOption,
    )
    .action(async (o) => {
      const [{ loadConfig }, { createLogger }, { openRuntime }, { serveStdioLocal, serveStdioRemote }] =
        await Promise.all([
          import('../config.js'),
          import('../logger.js'),
          import('../runtime.js'),
          import('../transports/stdio.js'),
        ])
      const config = loadConfig()
      if (o.url) {
        await serveStdioRemote(o.url, config.apiKey, o.tools)
        return
      }
      await serveStdioLocal(
        await openRuntime(config, { logger: createLogger(config, 2), existing: true }),
        config.apiKey,
        o.tools,
      )
    })
}

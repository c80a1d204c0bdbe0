import type { Command } from 'commander'

/** `serve` and `stdio`: the commands that run mailroom rather than administer it. */
export function addServeCommands(program: Command): void {
  program
    .command('serve')
    .description(
      'Run the service: REST and MCP on MAILROOM_HTTP_PORT, SMTP submission on MAILROOM_SMTP_PORT (STARTTLS) and MAILROOM_SMTPS_PORT (TLS), and delivery',
    )
    .action(async () => {
      // Each command loads what it runs when it runs: `mailroom --help` and the admin commands start fast.
      const [{ loadConfig }, { startServer }] = await Promise.all([import('../config.js'), import('../serve.js')])
      const running = await startServer(loadConfig())
      if (running.firstStart) process.stdout.write(`${running.firstStart}\n`)
      const stop = () => void running.stop().then(() => process.exit(0))
      process.once('SIGINT', stop)
      process.once('SIGTERM', stop)
    })

  program
    .command('stdio')
    .description('Serve the tools over MCP on stdin/stdout for a desktop assistant, as the account of MAILROOM_API_KEY')
    .option('--url <url>', 'act as a client of a remote mailroom at this address instead of the local data directory')
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
        await serveStdioRemote(o.url, config.apiKey)
        return
      }
      await serveStdioLocal(
        await openRuntime(config, { logger: createLogger(config, 2), existing: true }),
        config.apiKey,
      )
    })
}

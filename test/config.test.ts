import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { ConfigError, ConfigSchema, KNOWN_SETTINGS, loadConfig } from '../config.js'

describe('config', () => {
  it('has documented defaults', () => {
    const c = loadConfig({})
    expect(c.http).toEqual({ host: '127.0.0.1', port: 8080, bodyLimit: 40 * 1024 * 1024, maxAuthFailures: 30 })
    expect(c.publicUrl).toBe('http://localhost:8080')
    expect(c.dataDir).toMatch(/data$/)
    expect(c.maxMessageSize).toBe(25 * 1024 * 1024)
    expect(c.pricing).toEqual({ currency: 'USD', base: 1, perMessage: 0.0002, priced: false })
  })

  it('reads each variable', () => {
    const c = loadConfig({
      MAILROOM_DATA_DIR: '/tmp/x',
      MAILROOM_HTTP_HOST: '0.0.0.0',
      MAILROOM_HTTP_PORT: '9000',
      MAILROOM_PUBLIC_URL: 'https://mail.example.com/',
      MAILROOM_HTTP_BODY_LIMIT: '512kb',
      MAILROOM_HTTP_MAX_AUTH_FAILURES: '100',
      MAILROOM_CURRENCY: 'EUR',
      MAILROOM_PRICE_BASE: '2.5',
      MAILROOM_PRICE_PER_MESSAGE: '0.001',
    })
    expect(c.dataDir).toBe('/tmp/x')
    expect(c.http).toEqual({ host: '0.0.0.0', port: 9000, bodyLimit: 512 * 1024, maxAuthFailures: 100 })
    expect(c.publicUrl).toBe('https://mail.example.com')
    expect(c.pricing).toEqual({ currency: 'EUR', base: 2.5, perMessage: 0.001, priced: true })
    // One price set is a price set; the other keeps its default.
    expect(loadConfig({ MAILROOM_PRICE_PER_MESSAGE: '0' }).pricing).toEqual({
      currency: 'USD',
      base: 1,
      perMessage: 0,
      priced: true,
    })
  })

  it('reads the settings of received mail, with their defaults', () => {
    expect(
      loadConfig({
        MAILROOM_INBOUND_RETENTION: '7d',
        MAILROOM_INBOX_QUOTA: '50mb',
        MAILROOM_MX_HOSTNAME: 'mx.acme.example',
        MAILROOM_RETURN_PATH: 'Bounces',
      }).inbound,
    ).toEqual({
      retention: 7 * 86_400_000,
      quota: 50 * 1024 ** 2,
      mxHostname: 'mx.acme.example',
      returnPath: 'bounces',
    })
    expect(loadConfig({}).inbound).toMatchObject({ retention: 30 * 86_400_000, quota: 1024 ** 3, returnPath: null })
    for (const bad of ['bounces.acme', '-x', 'a'.repeat(64), 'b_x'])
      expect(() => loadConfig({ MAILROOM_RETURN_PATH: bad }), bad).toThrow(
        /MAILROOM_RETURN_PATH.*expected off or a DNS label, as bounces/,
      )
  })

  it('reads the relay settings', () => {
    const c = loadConfig({
      MAILROOM_SMTP_PORT: '25',
      MAILROOM_SMARTHOST: 'relay.example.com:587',
      MAILROOM_DNS_SERVERS: '127.0.0.1:5353,[::1]:53',
      MAILROOM_RETRY_SCHEDULE: '30s, 5m,1h',
      MAILROOM_MAX_QUEUE_AGE: '2d',
      MAILROOM_SMTP_AUTH_REQUIRES_TLS: 'false',
      MAILROOM_ALLOW_PRIVATE_MX: 'true',
      MAILROOM_BLOCK_EVENT_RETENTION: '7d',
      MAILROOM_TLS_CERT: '/etc/cert.pem',
      MAILROOM_TLS_KEY: '/etc/key.pem',
    })
    expect(c.smtp).toMatchObject({
      port: 25,
      securePort: 2465,
      authRequiresTls: false,
      tls: { cert: '/etc/cert.pem', key: '/etc/key.pem' },
    })
    expect(c.delivery).toMatchObject({
      smarthost: { host: 'relay.example.com', port: 587 },
      dnsServers: ['127.0.0.1:5353', '[::1]:53'],
      allowPrivateMx: true,
      retrySchedule: [30_000, 300_000, 3_600_000],
      maxQueueAge: 2 * 86_400_000,
    })
    expect(c.blockEventRetention).toBe(7 * 86_400_000)
    expect(loadConfig({}).delivery).toMatchObject({
      smarthost: null,
      mxPort: 25,
      allowPrivateMx: false,
      retrySchedule: [300_000, 600_000, 1_200_000, 2_400_000, 3_600_000, 7_200_000, 14_400_000],
      maxQueueAge: 48 * 3_600_000,
    })
  })

  it("reads the MX door's port, off by default", () => {
    expect(loadConfig({}).mx).toEqual({ host: '127.0.0.1', port: null })
    expect(loadConfig({ MAILROOM_MX_LISTEN_PORT: '25', MAILROOM_MX_LISTEN_HOST: '0.0.0.0' }).mx).toEqual({
      host: '0.0.0.0',
      port: 25,
    })
    expect(loadConfig({ MAILROOM_MX_LISTEN_PORT: 'off' }).mx.port).toBeNull()
    expect(() => loadConfig({ MAILROOM_MX_LISTEN_PORT: '70000' })).toThrow(/MAILROOM_MX_LISTEN_PORT="70000"/)
    // The port deliveries reach MX hosts on is another setting, unchanged.
    expect(loadConfig({ MAILROOM_MX_LISTEN_PORT: '2526' }).delivery.mxPort).toBe(25)
  })

  it('reads the implicit-TLS submission port, or off', () => {
    expect(loadConfig({ MAILROOM_SMTPS_PORT: '465' }).smtp.securePort).toBe(465)
    expect(loadConfig({ MAILROOM_SMTPS_PORT: '0' }).smtp.securePort).toBe(0)
    expect(loadConfig({ MAILROOM_SMTPS_PORT: 'off' }).smtp.securePort).toBeNull()
  })

  it('reads the SMTP connection limits, and refuses values that would lock clients out or overflow a timer', () => {
    expect(loadConfig({}).smtp).toMatchObject({ maxClientsPerAddress: 50, unauthenticatedTimeout: 30_000 })
    expect(
      loadConfig({ MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS: '5', MAILROOM_SMTP_UNAUTHENTICATED_TIMEOUT: '10s' }).smtp,
    ).toMatchObject({
      maxClientsPerAddress: 5,
      unauthenticatedTimeout: 10_000,
    })
    for (const [name, value] of [
      ['MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS', '0'],
      ['MAILROOM_SMTP_MAX_CLIENTS_PER_ADDRESS', 'many'],
      ['MAILROOM_SMTP_UNAUTHENTICATED_TIMEOUT', '500ms'],
      ['MAILROOM_SMTP_UNAUTHENTICATED_TIMEOUT', '30d'],
      ['MAILROOM_SMTP_UNAUTHENTICATED_TIMEOUT', '30'],
    ]) {
      expect(() => loadConfig({ [name]: value }), `${name}=${value}`).toThrow(ConfigError)
      expect(() => loadConfig({ [name]: value }), `${name}=${value}`).toThrow(name)
    }
  })

  it('takes DNS servers as IP addresses with or without a port', () => {
    expect(
      loadConfig({ MAILROOM_DNS_SERVERS: '192.0.2.53,192.0.2.54:5353,2001:db8::53,[2001:db8::54]:53' }).delivery
        .dnsServers,
    ).toEqual(['192.0.2.53', '192.0.2.54:5353', '2001:db8::53', '[2001:db8::54]:53'])
  })

  it('takes the trusted proxies as addresses, CIDR ranges and loopback, and none by default', () => {
    expect(loadConfig({}).trustProxy).toEqual([])
    expect(loadConfig({ MAILROOM_TRUST_PROXY: '10.0.0.0/8, 192.0.2.1,2001:db8::/32 ,loopback' }).trustProxy).toEqual([
      '10.0.0.0/8',
      '192.0.2.1',
      '2001:db8::/32',
      'loopback',
    ])
    for (const value of ['proxy.example', '10.0.0.0/33', '2001:db8::/129', '10.0.0.0/8/8', '10.0.0.1,', 'localhost']) {
      expect(() => loadConfig({ MAILROOM_TRUST_PROXY: value })).toThrow(
        `MAILROOM_TRUST_PROXY=${JSON.stringify(value)}: expected IP addresses, CIDR ranges (10.0.0.0/8) or loopback, separated by commas`,
      )
    }
  })

  it('wants the TLS certificate and key together', () => {
    expect(() => loadConfig({ MAILROOM_TLS_CERT: '/etc/cert.pem' })).toThrow(/MAILROOM_TLS_CERT and MAILROOM_TLS_KEY/)
  })

  it.each([
    ['MAILROOM_SMARTHOST', 'relay.example.com'],
    ['MAILROOM_RETRY_SCHEDULE', '5 minutes'],
    ['MAILROOM_MAX_QUEUE_AGE', '-1h'],
    ['MAILROOM_SMTP_AUTH_REQUIRES_TLS', 'yes'],
    ['MAILROOM_ALLOW_PRIVATE_MX', 'yes'],
    ['MAILROOM_HTTP_PORT', 'eighty'],
    ['MAILROOM_HTTP_PORT', '70000'],
    ['MAILROOM_PUBLIC_URL', 'not a url'],
    ['MAILROOM_HTTP_BODY_LIMIT', 'huge'],
    ['MAILROOM_HTTP_MAX_AUTH_FAILURES', '0'],
    ['MAILROOM_CURRENCY', 'dollars'],
    ['MAILROOM_PRICE_BASE', '-1'],
    ['MAILROOM_LOG_LEVEL', 'loud'],
    // Values that would parse but leave the relay unable to work.
    ['MAILROOM_MAX_MESSAGE_SIZE', '0'],
    ['MAILROOM_HTTP_BODY_LIMIT', '100b'],
    ['MAILROOM_MX_PORT', '0'],
    ['MAILROOM_DELIVERY_TIMEOUT', '0ms'],
    ['MAILROOM_RETRY_SCHEDULE', '5m,0s'],
    ['MAILROOM_MAX_QUEUE_AGE', '10s'],
    ['MAILROOM_BLOCK_EVENT_RETENTION', '1d'],
    ['MAILROOM_INBOUND_RETENTION', '10m'],
    ['MAILROOM_INBOX_QUOTA', '100b'],
    ['MAILROOM_MX_HOSTNAME', 'mx host'],
    ['MAILROOM_DNS_SERVERS', 'notanip'],
    ['MAILROOM_DNS_SERVERS', '192.0.2.53:53,dns.example:53'],
    ['MAILROOM_DNS_SERVERS', '2001:db8::53:53:99999'],
    // A timer past 2^31-1 ms overflows and fires at once: every delivery would time out.
    ['MAILROOM_DELIVERY_TIMEOUT', '30d'],
    ['MAILROOM_DELIVERY_TIMEOUT', '2147483648ms'],
    ['MAILROOM_SMARTHOST', '127.0.0.1:99999'],
    ['MAILROOM_SMARTHOST', 'relay.example.com:0'],
    // Read as numbers, these would be 0 (any free port) or another port than the one written.
    ['MAILROOM_HTTP_PORT', ' '],
    ['MAILROOM_HTTP_PORT', '0x1f90'],
    ['MAILROOM_SMTP_PORT', '25 '],
    ['MAILROOM_SMTPS_PORT', 'no'],
    ['MAILROOM_SMTPS_PORT', '70000'],
    ['MAILROOM_MX_PORT', '2.5e1'],
  ])('refuses a bad %s and names it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError)
    expect(() => loadConfig({ [name]: value })).toThrow(name)
  })

  it('reads the server secret as base64 of 32 bytes, and none by default', () => {
    expect(loadConfig({}).secretKey).toBeNull()
    const key = randomBytes(32)
    expect(loadConfig({ MAILROOM_SECRET_KEY: key.toString('base64') }).secretKey).toEqual(key)
  })

  it.each([
    ['31 bytes', randomBytes(31).toString('base64')],
    ['33 bytes', randomBytes(33).toString('base64')],
    ['hex', randomBytes(32).toString('hex')],
    ['base64url', `${'-_'.repeat(21)}A=`],
    ['without padding', randomBytes(32).toString('base64').slice(0, -1)],
    ['with blanks around it', ` ${randomBytes(32).toString('base64')}`],
  ])('refuses a server secret in %s, says how to make one, and does not repeat it', (_, value) => {
    expect(() => loadConfig({ MAILROOM_SECRET_KEY: value })).toThrow(ConfigError)
    expect(() => loadConfig({ MAILROOM_SECRET_KEY: value })).toThrow(
      'MAILROOM_SECRET_KEY: expected base64 of exactly 32 bytes; make one with `openssl rand -base64 32`',
    )
    expect(() => loadConfig({ MAILROOM_SECRET_KEY: value })).not.toThrow(value.trim())
  })

  it('reads the metrics token, and none (loopback only) by default; refuses a short or unsendable one without repeating it', () => {
    expect(loadConfig({}).metricsToken).toBeNull()
    const token = randomBytes(32).toString('hex')
    expect(loadConfig({ MAILROOM_METRICS_TOKEN: token }).metricsToken).toBe(token)
    for (const [value, why] of [
      ['s3cret-short', 'MAILROOM_METRICS_TOKEN: expected at least 16 characters'],
      ['a token with blanks in it', 'MAILROOM_METRICS_TOKEN: expected letters, digits and - . _ ~ + / only'],
    ]) {
      expect(() => loadConfig({ MAILROOM_METRICS_TOKEN: value })).toThrow(why)
      expect(() => loadConfig({ MAILROOM_METRICS_TOKEN: value })).not.toThrow(value)
    }
  })

  it('reads the database URL of several nodes, and none (SQLite) by default; refuses another scheme without repeating it', () => {
    expect(loadConfig({}).databaseUrl).toBeNull()
    const url = 'postgres://mailroom:s3cret@db.internal:5432/mailroom'
    expect(loadConfig({ MAILROOM_DATABASE_URL: url }).databaseUrl).toBe(url)
    expect(loadConfig({ MAILROOM_DATABASE_URL: 'postgresql://db/x' }).databaseUrl).toBe('postgresql://db/x')
    for (const value of ['mysql://root:s3cret@db/x', 'db.internal:5432', 'postgres:///x']) {
      expect(() => loadConfig({ MAILROOM_DATABASE_URL: value })).toThrow(
        'MAILROOM_DATABASE_URL: expected postgres://user:password@host:port/database',
      )
      expect(() => loadConfig({ MAILROOM_DATABASE_URL: value })).not.toThrow(value)
    }
  })

  it('reads the lease timeout: 10m by default, at least 5s', () => {
    expect(loadConfig({}).delivery.leaseTimeout).toBe(600_000)
    expect(loadConfig({ MAILROOM_LEASE_TIMEOUT: '5s' }).delivery.leaseTimeout).toBe(5000)
    expect(() => loadConfig({ MAILROOM_LEASE_TIMEOUT: '4999ms' })).toThrow(
      'MAILROOM_LEASE_TIMEOUT="4999ms": expected at least 5s',
    )
  })

  it('takes the longest delivery timeout a timer keeps', () => {
    expect(loadConfig({ MAILROOM_DELIVERY_TIMEOUT: '2147483647ms' }).delivery.timeout).toBe(2 ** 31 - 1)
    expect(loadConfig({ MAILROOM_DELIVERY_TIMEOUT: '24d' }).delivery.timeout).toBe(24 * 86_400_000)
  })

  it.each([
    ['MAILROOM_SMARTHOTS', 'MAILROOM_SMARTHOST'],
    ['MAILROOM_HTTP_PROT', 'MAILROOM_HTTP_PORT'],
    ['MAILROOM_smarthost', 'MAILROOM_SMARTHOST'],
    ['MAILROOM_DATADIR', 'MAILROOM_DATA_DIR'],
    ['MAILROOM_SMTPS_PROT', 'MAILROOM_SMTPS_PORT'],
  ])('refuses the unknown %s, naming %s, and not its value', (name, meant) => {
    expect(() => loadConfig({ [name]: 's3cret-value' })).toThrow(
      `invalid configuration: ${name}: no such setting (did you mean ${meant}?); every setting is listed in docs/configuration.md`,
    )
    expect(() => loadConfig({ [name]: 's3cret-value' })).not.toThrow('s3cret-value')
  })

  it('refuses an unknown MAILROOM_ variable like no setting without a suggestion, even set to nothing, and leaves other variables alone', () => {
    expect(() => loadConfig({ MAILROOM_COLOUR: 'blue' })).toThrow(
      'invalid configuration: MAILROOM_COLOUR: no such setting; every setting is listed in docs/configuration.md',
    )
    expect(() => loadConfig({ MAILROOM_SMARTHOTS: '' })).toThrow('did you mean MAILROOM_SMARTHOST?')
    expect(loadConfig({ MAILROOMX: '1', HOME: '/root', mailroom_smarthost: 'x' }).delivery.smarthost).toBeNull()
  })

  it("knows every setting, and the tests' own variables, so that a test run's environment starts mailroom", () => {
    expect(KNOWN_SETTINGS).toEqual([
      ...Object.keys(ConfigSchema.shape),
      'MAILROOM_TEST_DATABASE_URL',
      'MAILROOM_TEST_CHROMIUM',
    ])
    expect(() => loadConfig(Object.fromEntries(KNOWN_SETTINGS.map((k) => [k, undefined])))).not.toThrow()
    expect(loadConfig({ MAILROOM_TEST_DATABASE_URL: 'postgres://x@y/z', MAILROOM_TEST_CHROMIUM: '/c' })).toBeTruthy()
  })

  it.each(Object.keys(ConfigSchema.shape))('refuses %s set to nothing instead of taking its default', (name) => {
    for (const value of ['', '  ']) {
      expect(() => loadConfig({ [name]: value })).toThrow(ConfigError)
      expect(() => loadConfig({ [name]: value })).toThrow(
        `${name}=${JSON.stringify(value)}: empty; give it a value, or unset it for the default`,
      )
    }
  })
})

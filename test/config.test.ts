import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../config.js'

describe('config', () => {
  it('has documented defaults', () => {
    const c = loadConfig({})
    expect(c.http).toEqual({ host: '127.0.0.1', port: 8080, bodyLimit: 40 * 1024 * 1024 })
    expect(c.publicUrl).toBe('http://localhost:8080')
    expect(c.dataDir).toMatch(/data$/)
    expect(c.maxMessageSize).toBe(25 * 1024 * 1024)
    expect(c.pricing).toEqual({ currency: 'USD', base: 1, perMessage: 0.0002 })
  })

  it('reads each variable', () => {
    const c = loadConfig({
      MAILROOM_DATA_DIR: '/tmp/x',
      MAILROOM_HTTP_HOST: '0.0.0.0',
      MAILROOM_HTTP_PORT: '9000',
      MAILROOM_PUBLIC_URL: 'https://mail.example.com/',
      MAILROOM_HTTP_BODY_LIMIT: '512kb',
      MAILROOM_CURRENCY: 'EUR',
      MAILROOM_PRICE_BASE: '2.5',
      MAILROOM_PRICE_PER_MESSAGE: '0.001',
    })
    expect(c.dataDir).toBe('/tmp/x')
    expect(c.http).toEqual({ host: '0.0.0.0', port: 9000, bodyLimit: 512 * 1024 })
    expect(c.publicUrl).toBe('https://mail.example.com')
    expect(c.pricing).toEqual({ currency: 'EUR', base: 2.5, perMessage: 0.001 })
  })

  it.each([
    ['MAILROOM_HTTP_PORT', 'eighty'],
    ['MAILROOM_HTTP_PORT', '70000'],
    ['MAILROOM_PUBLIC_URL', 'not a url'],
    ['MAILROOM_HTTP_BODY_LIMIT', 'huge'],
    ['MAILROOM_CURRENCY', 'dollars'],
    ['MAILROOM_PRICE_BASE', '-1'],
    ['MAILROOM_LOG_LEVEL', 'loud'],
  ])('refuses a bad %s and names it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError)
    expect(() => loadConfig({ [name]: value })).toThrow(name)
  })
})

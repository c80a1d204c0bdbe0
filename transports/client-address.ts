import type { Context } from 'hono'

/** The client's IP address as the socket saw it (IPv4-mapped IPv6 shown as IPv4). */
export function clientIp(c: Context): string {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined
  const ip = env?.incoming?.socket?.remoteAddress ?? '127.0.0.1'
  return ip.startsWith('::ffff:') ? ip.slice(7) : ip
}

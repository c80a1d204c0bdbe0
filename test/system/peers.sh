#!/usr/bin/env bash
# The outside programs the system tests talk to: swaks (an SMTP client), Postfix's smtp-sink
# (a destination MX) and dnsmasq (a DNS server for the MX records). All from Debian's packages;
# smtp-sink is unpacked from the postfix package into .peers/ (no Postfix daemon is installed or
# started), and dnsmasq-base has no service to start. Run by `npm test` before vitest.
set -euo pipefail
cd "$(dirname "$0")/../.."
PEERS=.peers
SINK="$PEERS/postfix/usr/sbin/smtp-sink"

have_swaks() { command -v swaks >/dev/null 2>&1; }
have_sink() { [ -x "$SINK" ]; }
have_dnsmasq() { [ -x /usr/sbin/dnsmasq ]; }
have_swaks && have_sink && have_dnsmasq && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test/system/peers.sh: swaks, Postfix's smtp-sink and dnsmasq are needed; install swaks and dnsmasq-base, and unpack the postfix package into $PEERS/postfix (needs root and apt-get)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
have_swaks || apt-get install -y -qq swaks >/dev/null
have_dnsmasq || apt-get install -y -qq dnsmasq-base >/dev/null
if ! have_sink; then
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  (cd "$tmp" && apt-get download -qq postfix)
  mkdir -p "$PEERS/postfix"
  dpkg -x "$tmp"/postfix_*.deb "$PEERS/postfix"
  rm -rf "$tmp"
fi
echo "test/system/peers.sh: swaks $(command -v swaks), smtp-sink $SINK, dnsmasq /usr/sbin/dnsmasq"

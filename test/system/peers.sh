#!/usr/bin/env bash
# The outside programs the system tests talk to: swaks (an SMTP client) and Postfix's smtp-sink
# (a destination MX). Both from Debian's packages; smtp-sink is unpacked from the postfix package
# into .peers/ (no Postfix daemon is installed or started). Run by `npm test` before vitest.
set -euo pipefail
cd "$(dirname "$0")/../.."
PEERS=.peers
SINK="$PEERS/postfix/usr/sbin/smtp-sink"

have_swaks() { command -v swaks >/dev/null 2>&1; }
have_sink() { [ -x "$SINK" ]; }
have_swaks && have_sink && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "test/system/peers.sh: swaks and Postfix's smtp-sink are needed; install swaks and unpack the postfix package into $PEERS/postfix (needs root and apt-get)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
have_swaks || apt-get install -y -qq swaks >/dev/null
if ! have_sink; then
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  (cd "$tmp" && apt-get download -qq postfix)
  mkdir -p "$PEERS/postfix"
  dpkg -x "$tmp"/postfix_*.deb "$PEERS/postfix"
  rm -rf "$tmp"
fi
echo "test/system/peers.sh: swaks $(command -v swaks), smtp-sink $SINK"

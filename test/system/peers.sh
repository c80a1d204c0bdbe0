#!/usr/bin/env bash
# The outside programs the system tests talk to: swaks (an SMTP client), Postfix's smtp-sink
# (a destination MX) and dnsmasq (a DNS server for the MX records). All from Debian's packages;
# smtp-sink is unpacked from the postfix package into .peers/ (no Postfix daemon is installed or
# started), and dnsmasq-base has no service to start. And a PostgreSQL server for the PostgreSQL
# store's contract suite at MAILROOM_TEST_DATABASE_URL: where none answers there, a throwaway
# cluster of Debian's postgresql on the URL's port, in .peers/pgdata-PORT, trusting every
# connection from 127.0.0.1 (its log in .peers/pg-PORT.log). And Debian's chromium, the browser the
# console's tests drive (test/console/), and systemd-analyze, which checks docs/mailroom.service
# (Debian's systemd package: nothing of it is started). Run by `npm test` before vitest.
set -euo pipefail
cd "$(dirname "$0")/../.."
PEERS=.peers
SINK="$PEERS/postfix/usr/sbin/smtp-sink"
DATABASE_URL=${MAILROOM_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}

# The URL's parts: postgres://[USER[:PASSWORD]@]HOST[:PORT][/DATABASE]
url=${DATABASE_URL#*://}
PG_USER=postgres
if [[ $url == *@* ]]; then
  PG_USER=${url%%@*}
  PG_USER=${PG_USER%%:*}
  url=${url#*@}
fi
url=${url%%/*}
PG_HOST=${url%%:*}
PG_PORT=5432
if [[ $url == *:* ]]; then PG_PORT=${url##*:}; fi
PG_DATA="$PEERS/pgdata-$PG_PORT"
PG_LOG="$PEERS/pg-$PG_PORT.log"

have_swaks() { command -v swaks >/dev/null 2>&1; }
have_sink() { [ -x "$SINK" ]; }
have_dnsmasq() { [ -x /usr/sbin/dnsmasq ]; }
have_chromium() { [ -x /usr/bin/chromium ]; }
have_systemd_analyze() { command -v systemd-analyze >/dev/null 2>&1; }
# perf, for the bench's profile (test/bench/profile.test.ts): the wrapper runs only where a perf
# for the running kernel is installed.
have_perf() { perf --version >/dev/null 2>&1; }
have_tools() { have_swaks && have_sink && have_dnsmasq && have_chromium && have_systemd_analyze && have_perf; }
pg_answers() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$PG_HOST" -p "$PG_PORT"
  else
    (exec 3<>"/dev/tcp/$PG_HOST/$PG_PORT") 2>/dev/null
  fi
}
pg_bin() { find /usr/lib/postgresql -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n 1; }
can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }
skip_postgres() {
  {
    echo "*****************************************************************************************"
    echo "test/system/peers.sh: no PostgreSQL answers at $PG_HOST:$PG_PORT (MAILROOM_TEST_DATABASE_URL),"
    echo "  and none is started here: $1."
    echo "  The PostgreSQL contract suite will be SKIPPED (with CI=true it fails)."
    echo "*****************************************************************************************"
  } >&2
}

have_tools && pg_answers && exit 0

if ! can_install; then
  have_tools ||
    echo "test/system/peers.sh: swaks, Postfix's smtp-sink, dnsmasq, chromium, systemd-analyze and perf are needed; install swaks, dnsmasq-base, chromium, systemd and linux-perf, and unpack the postfix package into $PEERS/postfix (needs root and apt-get); without chromium the console's tests are SKIPPED, without systemd-analyze the systemd unit's, without perf the bench profile's (with CI=true they fail)" >&2
  pg_answers || skip_postgres "starting one needs root and apt-get"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt_updated=
apt_update() {
  [ -n "$apt_updated" ] || apt-get update -qq
  apt_updated=1
}
apt_install() {
  apt_update
  apt-get install -y -qq "$@" >/dev/null
}
if ! have_tools; then
  have_swaks || apt_install swaks
  have_dnsmasq || apt_install dnsmasq-base
  have_chromium || apt_install chromium
  have_systemd_analyze || apt_install systemd
  have_perf || apt_install linux-perf
  if ! have_sink; then
    apt_update
    tmp=$(mktemp -d)
    chmod 755 "$tmp"
    (cd "$tmp" && apt-get download -qq postfix)
    mkdir -p "$PEERS/postfix"
    dpkg -x "$tmp"/postfix_*.deb "$PEERS/postfix"
    rm -rf "$tmp"
  fi
  echo "test/system/peers.sh: swaks $(command -v swaks), smtp-sink $SINK, dnsmasq /usr/sbin/dnsmasq, chromium /usr/bin/chromium, systemd-analyze $(command -v systemd-analyze), perf $(command -v perf)"
fi

pg_answers && exit 0
if [ "$PG_HOST" != 127.0.0.1 ] && [ "$PG_HOST" != localhost ]; then
  skip_postgres "$PG_HOST is another machine"
  exit 0
fi
[ -x "$(pg_bin)/initdb" ] || apt_install postgresql
bin=$(pg_bin)
# The cluster is the postgres user's (the server refuses to run as root); named by its port, so
# that clusters for different URLs never share a directory.
mkdir -p "$PG_DATA"
chown postgres: "$PG_DATA"
chmod 700 "$PG_DATA"
touch "$PG_LOG"
chown postgres: "$PG_LOG"
as_postgres() { runuser -u postgres -- "$@"; }
[ -f "$PG_DATA/PG_VERSION" ] ||
  as_postgres "$bin/initdb" -D "$PWD/$PG_DATA" -U "$PG_USER" --auth=trust >/dev/null
if ! as_postgres "$bin/pg_ctl" start -w -D "$PWD/$PG_DATA" -l "$PWD/$PG_LOG" \
  -o "-p $PG_PORT -k /tmp -c listen_addresses=127.0.0.1" >/dev/null; then
  tail -n 20 "$PG_LOG" >&2
  skip_postgres "its cluster in $PG_DATA did not start (its log above, in $PG_LOG)"
  exit 0
fi
echo "test/system/peers.sh: PostgreSQL on 127.0.0.1:$PG_PORT, cluster $PG_DATA, log $PG_LOG"

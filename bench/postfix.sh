#!/usr/bin/env bash
# The Postfix baselines: Debian's Postfix as a separate instance in its own directory, on
# loopback; the system's Postfix is not started.
#   bench/postfix.sh start DIR PORT SINK_PORT [--tls] [--dkim DOMAIN MILTER_PORT]
#       #3, #11: a relay whose relayhost is the sink. --tls offers STARTTLS (a self-signed
#       certificate, made once in DIR); --dkim signs mail from DOMAIN by an OpenDKIM of its own,
#       a milter on 127.0.0.1:MILTER_PORT, with an RSA 2048 key made once in DIR, whose DNS record
#       (the TXT value at opendkim._domainkey.DOMAIN) is written to DIR/dkim.txt. Started again
#       over the same DIR, it keeps the certificate and the key.
#   bench/postfix.sh virtual DIR PORT DOMAIN LOCAL  #10: an MX for DOMAIN, whose one mailbox,
#                                                   LOCAL@DOMAIN, is the Maildir DIR/mail/DOMAIN/LOCAL/
#   bench/postfix.sh stop DIR                       stops the instance, and its OpenDKIM if any
set -euo pipefail
cmd=$1 dir=$2
export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; }
# Postfix logs its own errors only to syslog unless it runs on a terminal: give it one.
run() { script -qec "$*" /dev/null; }

# The instance's directories, master.cf with smtpd on 127.0.0.1:PORT, and what main.cf always has.
prepare() {
  local port=$1
  command -v postfix >/dev/null 2>&1 || apt_install postfix
  mkdir -p "$dir/etc" "$dir/queue" "$dir/data"
  # Postfix drops privileges: its user must be able to reach the instance.
  chmod 755 "$dir"
  chown postfix "$dir/data"
  sed "s/^smtp      inet .*smtpd\$/127.0.0.1:$port inet n - n - - smtpd/" /etc/postfix/master.cf > "$dir/etc/master.cf"
  cat > "$dir/etc/main.cf" <<CF
compatibility_level = 3.6
queue_directory = $dir/queue
data_directory = $dir/data
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = bench.localdomain
mydestination =
local_recipient_maps =
alias_maps =
alias_database =
smtp_tls_security_level = none
smtpd_tls_security_level = none
maillog_file_prefixes = $dir
maillog_file = $dir/maillog
CF
}

# The default instance's configuration is shared by every instance, and instances start and stop
# side by side (the bench's tests run in parallel): each change to it is made under a lock.
shared() { { flock 9 && "$@"; } 9</etc/postfix; }

name_instance() {
  local current
  current=$(postconf -h alternate_config_directories)
  case " $current " in *" $dir/etc "*) ;; *) postconf -e "alternate_config_directories = $current $dir/etc" ;; esac
}

unname_instance() {
  local rest
  rest=$(postconf -h alternate_config_directories | tr ' ' '\n' | grep -vxF "$dir/etc" | tr '\n' ' ' || true)
  postconf -e "alternate_config_directories = $rest"
}

# A non-default instance must be named in the default instance's configuration.
launch() {
  shared name_instance
  run postfix -c "$dir/etc" check
  run postfix -c "$dir/etc" start
}

# STARTTLS offered, not required (as on port 25): an ECDSA P-256 certificate, the kind mailroom
# generates for itself, so that both sides' handshakes cost the same.
offer_tls() {
  [ -f "$dir/tls-key.pem" ] ||
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
      -subj /CN=bench.localdomain -keyout "$dir/tls-key.pem" -out "$dir/tls-cert.pem" 2>/dev/null
  chmod 600 "$dir/tls-key.pem"
  postconf -c "$dir/etc" -e "smtpd_tls_security_level = may" \
    "smtpd_tls_chain_files = $dir/tls-key.pem, $dir/tls-cert.pem"
}

# Debian's opendkim as Debian configures it (its /etc/opendkim.conf: OversignHeaders From, UMask
# 007, its own user), but relaxed/relaxed, logging nowhere, and signing DOMAIN's mail from
# loopback (InternalHosts' default) with a key of its own; Postfix hands it every message and
# holds the message back (4xx) should it not answer. The key is the opendkim user's alone, but
# the run's directory is under the temporary directory, which anyone may write: RequireSafeKeys
# would refuse the key for that.
sign_with_opendkim() {
  local domain=$1 milter=$2
  command -v opendkim >/dev/null 2>&1 || apt_install opendkim
  mkdir -p "$dir/opendkim"
  if [ ! -f "$dir/opendkim/key.pem" ]; then
    openssl genrsa -out "$dir/opendkim/key.pem" 2048 2>/dev/null
    echo "v=DKIM1; k=rsa; p=$(openssl rsa -in "$dir/opendkim/key.pem" -pubout -outform DER 2>/dev/null | base64 -w0)" > "$dir/dkim.txt"
  fi
  chown -R opendkim: "$dir/opendkim"
  chmod 700 "$dir/opendkim"
  chmod 600 "$dir/opendkim/key.pem"
  cat > "$dir/opendkim.conf" <<CF
Syslog no
UMask 007
UserID opendkim
Mode s
Domain $domain
Selector opendkim
KeyFile $dir/opendkim/key.pem
RequireSafeKeys no
Canonicalization relaxed/relaxed
OversignHeaders From
Socket inet:$milter@127.0.0.1
PidFile $dir/opendkim/opendkim.pid
CF
  opendkim -x "$dir/opendkim.conf"
  # It forks into the background: it is ready once its socket answers.
  local tries=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$milter") 2>/dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -ge 100 ]; then
      echo "postfix.sh: opendkim does not answer on 127.0.0.1:$milter" >&2
      exit 1
    fi
    sleep 0.1
  done
  postconf -c "$dir/etc" -e "smtpd_milters = inet:127.0.0.1:$milter" "milter_default_action = tempfail"
}

# Stops the OpenDKIM started in DIR, if any, and waits until it is gone.
stop_opendkim() {
  local pidfile=$dir/opendkim/opendkim.pid pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

case "$cmd" in
start)
  port=$3 sink=$4
  shift 4
  prepare "$port"
  cat >> "$dir/etc/main.cf" <<CF
mynetworks = 127.0.0.0/8
relayhost = [127.0.0.1]:$sink
smtpd_relay_restrictions = permit_mynetworks, reject
CF
  while [ $# -gt 0 ]; do
    case $1 in
    --tls) offer_tls ;;
    --dkim)
      sign_with_opendkim "$2" "$3"
      shift 2
      ;;
    *)
      echo "postfix.sh start: unknown option $1" >&2
      exit 2
      ;;
    esac
    shift
  done
  launch
  ;;
virtual)
  port=$3 domain=$4 local=$5
  prepare "$port"
  # An MX as the internet sees one: it takes mail for its domain's mailboxes only (unknown
  # recipients are refused at RCPT, other domains are no relay), and virtual(8) delivers each
  # message into the mailbox's Maildir as an unprivileged user.
  mkdir -p "$dir/mail"
  chown nobody:nogroup "$dir/mail"
  echo "$local@$domain $domain/$local/" > "$dir/etc/vmailbox"
  cat >> "$dir/etc/main.cf" <<CF
mynetworks =
relayhost =
smtpd_relay_restrictions = reject_unauth_destination
virtual_mailbox_domains = $domain
virtual_mailbox_base = $dir/mail
virtual_mailbox_maps = texthash:$dir/etc/vmailbox
virtual_uid_maps = static:$(id -u nobody)
virtual_gid_maps = static:$(id -g nobody)
CF
  launch
  ;;
stop)
  run postfix -c "$dir/etc" stop || true
  stop_opendkim
  shared unname_instance
  ;;
esac

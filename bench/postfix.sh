#!/usr/bin/env bash
# The Postfix baselines: Debian's Postfix as a separate instance in its own directory, on
# loopback; the system's Postfix is not started.
#   bench/postfix.sh start DIR PORT SINK_PORT       #3: a relay whose relayhost is the sink
#   bench/postfix.sh virtual DIR PORT DOMAIN LOCAL  #10: an MX for DOMAIN, whose one mailbox,
#                                                   LOCAL@DOMAIN, is the Maildir DIR/mail/DOMAIN/LOCAL/
#   bench/postfix.sh stop DIR
set -euo pipefail
cmd=$1 dir=$2
# Postfix logs its own errors only to syslog unless it runs on a terminal: give it one.
run() { script -qec "$*" /dev/null; }

# The instance's directories, master.cf with smtpd on 127.0.0.1:PORT, and what main.cf always has.
prepare() {
  local port=$1
  if ! command -v postfix >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq postfix >/dev/null
  fi
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

# A non-default instance must be named in the default instance's configuration.
launch() {
  local current
  current=$(postconf -h alternate_config_directories)
  case " $current " in *" $dir/etc "*) ;; *) postconf -e "alternate_config_directories = $current $dir/etc" ;; esac
  run postfix -c "$dir/etc" check
  run postfix -c "$dir/etc" start
}

case "$cmd" in
start)
  port=$3 sink=$4
  prepare "$port"
  cat >> "$dir/etc/main.cf" <<CF
mynetworks = 127.0.0.0/8
relayhost = [127.0.0.1]:$sink
smtpd_relay_restrictions = permit_mynetworks, reject
CF
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
  rest=$(postconf -h alternate_config_directories | tr ' ' '\n' | grep -vxF "$dir/etc" | tr '\n' ' ' || true)
  postconf -e "alternate_config_directories = $rest"
  ;;
esac

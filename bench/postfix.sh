#!/usr/bin/env bash
# The baseline relay of benchmark #3: Debian's Postfix as a loopback relay whose relayhost is the
# benchmark's sink. A separate instance in its own directory; the system's Postfix is not started.
#   bench/postfix.sh start DIR PORT SINK_PORT     bench/postfix.sh stop DIR
set -euo pipefail
cmd=$1 dir=$2
# Postfix logs its own errors only to syslog unless it runs on a terminal: give it one.
run() { script -qec "$*" /dev/null; }
case "$cmd" in
start)
  port=$3 sink=$4
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
mynetworks = 127.0.0.0/8
relayhost = [127.0.0.1]:$sink
myhostname = bench.localdomain
mydestination =
local_recipient_maps =
alias_maps =
alias_database =
smtpd_relay_restrictions = permit_mynetworks, reject
smtp_tls_security_level = none
smtpd_tls_security_level = none
maillog_file_prefixes = $dir
maillog_file = $dir/maillog
CF
  # A non-default instance must be named in the default instance's configuration.
  current=$(postconf -h alternate_config_directories)
  case " $current " in *" $dir/etc "*) ;; *) postconf -e "alternate_config_directories = $current $dir/etc" ;; esac
  run postfix -c "$dir/etc" check
  run postfix -c "$dir/etc" start
  ;;
stop)
  run postfix -c "$dir/etc" stop || true
  rest=$(postconf -h alternate_config_directories | tr ' ' '\n' | grep -vxF "$dir/etc" | tr '\n' ' ' || true)
  postconf -e "alternate_config_directories = $rest"
  ;;
esac

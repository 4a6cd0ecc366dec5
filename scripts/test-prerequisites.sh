#!/usr/bin/env bash
# Run first by `npm test`: makes sure of what the tests need, or stops at once saying what
# is missing, so a fresh machine fails here with one plain line instead of in a hundred
# tests. Services: the ones the tests reach (PostgreSQL, RabbitMQ, Redis, NATS JetStream),
# at the addresses the tests read from the same variables; a local one that is down is
# started the way CI always started it. Chromium: Debian's, for the browser tests.
#
# GANTRY_TEST_SERVICE_WAIT_S bounds the wait for each service (default 60), so the test of
# this script can see its failure without waiting a minute.
set -uo pipefail

WAIT_S=${GANTRY_TEST_SERVICE_WAIT_S:-60}
CHROMIUM=${CHROMIUM_PATH:-/usr/bin/chromium}

fail() {
  echo "test prerequisites: $*" >&2
  exit 1
}

# host:port of a URL such as amqp://user:pass@host:5672/vhost or host:port.
hostport() {
  local rest=${1#*://}
  rest=${rest##*@}
  echo "${rest%%/*}"
}

probe_tcp() { timeout 2 bash -c "</dev/tcp/$1/$2" >/dev/null 2>&1; }
probe_pg() { timeout 3 pg_isready -q -h "$1" -p "$2" >/dev/null 2>&1; }
probe_redis() { [ "$(timeout 3 redis-cli -h "$1" -p "$2" ping 2>/dev/null)" = PONG ]; }

# name, probe function, host, port, default port, start command (for the local default only)
ensure() {
  local name=$1 probe=$2 host=$3 port=$4 default_port=$5 start=$6
  if "$probe" "$host" "$port"; then
    echo "$name: up at $host:$port"
    return
  fi
  if [ "$host" = 127.0.0.1 ] && [ "$port" = "$default_port" ]; then
    echo "$name: down at $host:$port, starting it"
    # Into a file, not a pipe: a daemon that keeps the pipe open would hold this script.
    # Its output is only worth showing when the start fails.
    local log
    log=$(mktemp)
    if ! eval "$start" >"$log" 2>&1 </dev/null; then
      local output
      output=$(tr '\n' ' ' <"$log")
      rm -f "$log"
      fail "$name: could not start it ($start): $output"
    fi
    rm -f "$log"
  else
    echo "$name: nothing answers at $host:$port (not the local default, so not started here)"
  fi
  local since=$SECONDS shown=-1
  while ! "$probe" "$host" "$port"; do
    local waited=$((SECONDS - since))
    if [ "$waited" -ge "$WAIT_S" ]; then
      fail "$name: nothing answers at $host:$port after ${WAIT_S} s; start $name there, or point the tests elsewhere"
    fi
    if [ $((waited / 5)) -gt "$shown" ]; then
      shown=$((waited / 5))
      echo "$name: waiting for $host:$port (${waited} s of ${WAIT_S} s)"
    fi
    sleep 1
  done
  echo "$name: up at $host:$port"
}

PG_HOST=${PGHOST:-127.0.0.1}
PG_PORT=${PGPORT:-5432}
AMQP=$(hostport "${GANTRY_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672}")
REDIS=$(hostport "${GANTRY_TEST_REDIS_URL:-redis://127.0.0.1:6379}")
NATS=$(hostport "${GANTRY_TEST_NATS_SERVER:-127.0.0.1:4222}")

ensure postgres probe_pg "$PG_HOST" "$PG_PORT" 5432 \
  'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start'
ensure rabbitmq probe_tcp "${AMQP%:*}" "${AMQP##*:}" 5672 "rabbitmq-server -detached"
ensure redis probe_redis "${REDIS%:*}" "${REDIS##*:}" 6379 \
  'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log'
ensure nats probe_tcp "${NATS%:*}" "${NATS##*:}" 4222 \
  'start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log'

# Two RabbitMQ tests drive the broker through rabbitmqctl (close a connection, import
# definitions); a broker it cannot reach (another host, another Erlang cookie) fails them.
timeout 60 rabbitmqctl -q list_vhosts >/dev/null 2>&1 ||
  fail "rabbitmq: rabbitmqctl cannot reach the broker; run the tests as a user whose Erlang cookie matches it (root or rabbitmq)"
echo "rabbitmq: rabbitmqctl reaches it"

# The browser tests drive Debian's Chromium through playwright-core, which downloads none.
if [ -x "$CHROMIUM" ]; then
  echo "chromium: $CHROMIUM"
elif [ "$CHROMIUM" != /usr/bin/chromium ]; then
  fail "chromium: CHROMIUM_PATH=$CHROMIUM is not an executable"
elif [ "$(id -u)" -ne 0 ]; then
  fail "chromium: $CHROMIUM is missing; install Debian's chromium package (sudo apt-get install chromium)"
else
  echo "chromium: missing, installing Debian's chromium package"
  # --error-on=any: without it apt-get update succeeds with stale or no package lists.
  apt-get update -qq --error-on=any || fail "chromium: apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ||
    fail "chromium: apt-get install chromium failed"
  [ -x "$CHROMIUM" ] || fail "chromium: installed, yet $CHROMIUM is not there"
  echo "chromium: installed"
fi

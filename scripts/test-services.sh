#!/usr/bin/env bash
# The machine's services the OpenStack tests use — MariaDB (nova's, placement's and Ironic's
# databases) and RabbitMQ (nova's RPC, Ironic's notifications) — answering on loopback;
# started when installed and down. The tests make their own databases and vhost in them and
# remove them after. `make test` and .ci/run call it (after scripts/test-packages.sh).
set -euo pipefail

mariadb_up() { mariadb --protocol=tcp --host=127.0.0.1 --user=root -e 'SELECT 1' >/dev/null 2>&1; }
rabbitmq_up() { rabbitmqctl -q status >/dev/null 2>&1; }

# until NAME CHECK: wait up to 60 s for CHECK.
until_up() {
  local name=$1 check=$2
  for _ in $(seq 120); do "$check" && return 0; sleep 0.5; done
  echo "test-services: $name did not answer within 60 s" >&2
  exit 1
}

if ! mariadb_up; then
  echo "test-services: starting MariaDB" >&2
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
  until_up MariaDB mariadb_up
fi
if ! rabbitmq_up; then
  echo "test-services: starting RabbitMQ" >&2
  rabbitmq-server -detached
  until_up RabbitMQ rabbitmq_up
fi

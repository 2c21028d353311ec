#!/usr/bin/env bash
# The Debian packages the tests need, installed when missing: one apt-get for all of
# them. Not root: stop at once with the one line to run. `make test` and .ci/run call it.
set -euo pipefail

missing=()
# need PACKAGE CHECK...: PACKAGE is missing when CHECK fails.
need() {
  local package=$1
  shift
  "$@" >/dev/null 2>&1 || missing+=("$package")
}
need redis-server command -v redis-server
need redis-sentinel command -v redis-sentinel
# `shardbridge run` starts its child through setpriv; its watchdog is bash.
need util-linux command -v setpriv
need curl command -v curl
# `run --egress-fence` writes its rule with nft (test/process/run-egress-fence.test.ts).
need nftables command -v nft
# ... and, once its child is gone, resets the connections the child left with ss -K.
need iproute2 command -v ss
# The README's tour (test/process/readme-tour.test.ts) signs its webhook delivery with openssl.
need openssl command -v openssl
# The status page and the simulator's page are tested in a real headless browser.
need chromium test -x /usr/bin/chromium
# Debian's python: the real tooz for the ring parity tests, and what nova uses
# (oslo.config, openstacksdk) for the nova-compute stand-in.
need python3-tooz /usr/bin/python3 -c 'import tooz.hashring'
need python3-oslo.config /usr/bin/python3 -c 'import oslo_config'
need python3-openstacksdk /usr/bin/python3 -c 'import openstack'
# Ironic 21.4's trait names, which the bridge's (os-traits 3.9.0) must hold (test/openstack/os-traits.test.ts).
need python3-os-traits /usr/bin/python3 -c 'import os_traits'
# Today's OpenStack (scripts/openstack-venv.sh) keeps its databases in MariaDB and talks
# over RabbitMQ (scripts/test-services.sh starts them when they are down).
need mariadb-server test -x /usr/sbin/mariadbd
need mariadb-client command -v mariadb
need rabbitmq-server command -v rabbitmqctl
# The real Ironic and inspector the peers in ../shared/peers start (when they are there).
if [ -d "${BASH_SOURCE[0]%/*}/../../shared/peers" ]; then
  need ironic-common test -x /usr/bin/ironic
  need python3-ironic-inspector /usr/bin/python3 -c 'import ironic_inspector.cmd.all'
fi

[ ${#missing[@]} -eq 0 ] && exit 0
line="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$EUID" -ne 0 ]; then
  echo "the tests need Debian packages that are missing; run, then make test again:" >&2
  echo "  sudo apt-get update && sudo $line" >&2
  exit 1
fi
echo "installing the tests' Debian packages: ${missing[*]}" >&2
# Package scripts (ironic's) start services through invoke-rc.d: none in a container or
# on CI. Deny service starts for the install, unless a policy is in place already.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
  "${missing[@]}" >/dev/null

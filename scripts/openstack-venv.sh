#!/usr/bin/env bash
# The Python virtual environment of the OpenStack peers the tests run (nova, Ironic,
# placement, keystone, glance, neutron, openstacksdk), built from
# test/openstack/requirements.txt and kept between runs: its folder is named by the
# requirements' hash, so a changed pin builds a new one. Another pin's environment is
# removed once nothing used it for a week (each use touches its marker): a second checkout
# on other pins may be running its tests in it. `make test` and .ci/run call it; the tests
# find the folder with `--path`.
#
#   scripts/openstack-venv.sh          build it when missing; print its folder
#   scripts/openstack-venv.sh --path   print its folder only (built or not)
#
# Env: SHARDBRIDGE_OPENSTACK_VENV names the folder instead (nothing is removed then);
# PYTHON, the interpreter to build it with (default python3, 3.10 or later).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
requirements="$here/../test/openstack/requirements.txt"
digest="$(sha256sum "$requirements" | cut -c1-12)"
parent="${XDG_CACHE_HOME:-$HOME/.cache}/shardbridge"
venv="${SHARDBRIDGE_OPENSTACK_VENV:-$parent/openstack-$digest}"

if [ "${1:-}" = "--path" ]; then
  echo "$venv"
  exit 0
fi

# Built whole or not at all: the marker is written last, so an interrupted build is
# started again rather than half used.
if [ -f "$venv/.complete" ]; then
  touch "$venv/.complete"
  echo "$venv"
  exit 0
fi

python="${PYTHON:-python3}"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
  echo "openstack-venv: $python is older than 3.10; nova 34 needs 3.10 or later (set PYTHON)" >&2
  exit 1
}
# Debian's python3 has no venv module without python3-venv; pyenv's and python.org's do.
if ! "$python" -c 'import ensurepip' >/dev/null 2>&1; then
  if [ "$EUID" -ne 0 ]; then
    echo "openstack-venv: $python cannot make a venv; run: sudo apt-get install -y python3-venv python3-dev gcc" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv python3-dev gcc >/dev/null
fi

started=$SECONDS
echo "openstack-venv: building $venv from test/openstack/requirements.txt (about 3 minutes, 650 MB)" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$requirements" >&2
touch "$venv/.complete"
# Environments of other pins that nothing used for a week (or builds interrupted a day ago).
if [ -z "${SHARDBRIDGE_OPENSTACK_VENV:-}" ]; then
  for old in "$parent"/openstack-*; do
    if [ "$old" = "$venv" ]; then continue; fi
    if [ -f "$old/.complete" ]; then
      unused="$(find "$old/.complete" -mtime +7)"
    else
      unused="$(find "$old" -maxdepth 0 -mtime +1)"
    fi
    if [ -n "$unused" ]; then rm -rf "$old"; fi
  done
fi
echo "openstack-venv: built in $((SECONDS - started)) s" >&2
echo "$venv"

#!/usr/bin/env bash
# A lease handover by hand against a running bridge (make run): compute-0 takes shard
# "demo", compute-1 is refused, compute-0 releases, compute-1 takes over with a higher
# token, and compute-0's old token no longer passes fence. Uses the admin dev token,
# which may act for any agent (an agent token acts only as its own agent).
set -euo pipefail
BRIDGE=${BRIDGE:-http://127.0.0.1:6390}
TOKENS=${TOKENS:-.state/dev-tokens.json}
ADMIN=$(node -e 'const t = require(process.argv[1]).tokens.find((t) => t.role === "admin"); console.log(t.token)' "$(realpath "$TOKENS")")
post() { curl -s -X "$1" "$BRIDGE$2" -H "authorization: Bearer $ADMIN" -H 'content-type: application/json' -d "$3"; echo; }

# A bridge that just started on the embedded store waits one TTL (6 s) before it grants a
# lease on a shard it knows nothing of: its state died with its previous process.
until curl -sf -X POST "$BRIDGE/v1/shards/demo/lease" -H "authorization: Bearer $ADMIN" -d '{"agent":"compute-0"}'; do
  echo "(store recovering, retrying)"; sleep 1
done; echo
TOKEN=$(curl -s -H "authorization: Bearer $ADMIN" "$BRIDGE/v1/shards/demo/lease" | sed -E 's/.*"token":([0-9]+).*/\1/')
post POST /v1/shards/demo/lease '{"agent":"compute-1"}'
post POST /v1/shards/demo/fence "{\"token\":$TOKEN}"
post DELETE /v1/shards/demo/lease "{\"agent\":\"compute-0\",\"token\":$TOKEN}"
post POST /v1/shards/demo/lease '{"agent":"compute-1"}'
post POST /v1/shards/demo/fence "{\"token\":$TOKEN}"
curl -s -H "authorization: Bearer $ADMIN" "$BRIDGE/v1/shards"; echo

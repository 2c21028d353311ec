#!/usr/bin/env bash
# A lease handover by hand against a running bridge (make run): compute-0 takes shard
# "demo", compute-1 is refused, compute-0 releases, compute-1 takes over with a higher
# token, and compute-0's old token no longer passes fence; compute-1 hands the shard back
# at the end, so the walk can be run again at once. Uses the admin dev token, which may act
# for any agent (an agent token acts only as its own agent).
set -euo pipefail
BRIDGE=${BRIDGE:-http://127.0.0.1:6390}
TOKENS=${TOKENS:-.state/dev-tokens.json}
if [ ! -r "$TOKENS" ]; then
  echo "no $TOKENS: start the bridge with make run (it writes the development tokens there), or set TOKENS" >&2
  exit 1
fi
ADMIN=$(node -e 'const t = require(process.argv[1]).tokens.find((t) => t.role === "admin"); console.log(t.token)' "$(realpath "$TOKENS")")
post() { curl -s -X "$1" "$BRIDGE$2" -H "authorization: Bearer $ADMIN" -H 'content-type: application/json' -d "$3"; echo; }
field() { node -p "JSON.parse(fs.readFileSync(0)).$1"; }

# compute-0 asks for the lease. 409 shardbridge.lease.recovering: a bridge that just started
# on the embedded store grants no lease for one TTL (6 s) on a shard it knows nothing of, as
# its state died with its previous process; it says how long (retry_after_ms), so wait that
# and ask again. 409 shardbridge.lease.held: another agent holds the shard (an agent left
# running, or this walk stopped half way); waiting would not end it while that agent renews.
for attempt in 1 2 3 4 5; do
  answer=$(curl -s -w '\n%{http_code}' -X POST "$BRIDGE/v1/shards/demo/lease" \
    -H "authorization: Bearer $ADMIN" -H 'content-type: application/json' -d '{"agent":"compute-0"}') ||
    { echo "cannot reach the bridge at $BRIDGE (make run starts one; BRIDGE names another)" >&2; exit 1; }
  status=${answer##*$'\n'} body=${answer%$'\n'*}
  code=$([ "$status" = 200 ] || echo "$body" | field 'errors[0].code' 2>/dev/null || true)
  if [ "$status" = 200 ]; then
    echo "$body"
    break
  elif [ "$code" = shardbridge.lease.recovering ] && [ "$attempt" -lt 5 ]; then
    wait_ms=$(echo "$body" | field 'errors[0].retry_after_ms')
    echo "(the bridge's store is recovering: it grants leases in $wait_ms ms; waiting)"
    sleep "$(node -p "Math.ceil($wait_ms / 100) / 10")"
  elif [ "$code" = shardbridge.lease.held ]; then
    echo "$(echo "$body" | field 'errors[0].detail'): stop that agent (or release its lease:" \
      "DELETE /v1/shards/demo/lease {\"agent\",\"token\"}) and run this again" >&2
    exit 1
  else
    echo "the bridge refused the lease ($status): $body" >&2
    exit 1
  fi
done
TOKEN=$(echo "$body" | field token)
post POST /v1/shards/demo/lease '{"agent":"compute-1"}'
post POST /v1/shards/demo/fence "{\"token\":$TOKEN}"
post DELETE /v1/shards/demo/lease "{\"agent\":\"compute-0\",\"token\":$TOKEN}"
NEXT=$(post POST /v1/shards/demo/lease '{"agent":"compute-1"}')
echo "$NEXT"
post POST /v1/shards/demo/fence "{\"token\":$TOKEN}"
curl -s -H "authorization: Bearer $ADMIN" "$BRIDGE/v1/shards"; echo
post DELETE /v1/shards/demo/lease "{\"agent\":\"compute-1\",\"token\":$(echo "$NEXT" | field token)}"

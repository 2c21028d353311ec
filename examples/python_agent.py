#!/usr/bin/env python3
"""A compute agent for shardbridge in plain Python (standard library only), the way
nova-compute's ironic driver would call the bridge.

    python3 examples/python_agent.py --id compute-0 --shard demo \
        --bridge http://127.0.0.1:6390 --token "$AGENT_TOKEN"

It acquires the shard's lease or stands by, renews every TTL/3, stops acting on its own
when its monotonic clock passes 2/3 TTL after the last renew it sent that succeeded,
lists its nodes while active, and hands the lease back on SIGTERM. One JSON line per event.
"""
import argparse
import json
import signal
import sys
import time
import urllib.error
import urllib.request


def log(event, **fields):
    print(json.dumps({"ev": event, "t": time.time(), **fields}), flush=True)


class Bridge:
    def __init__(self, url, token, timeout=2.0):
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={
            "Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                text = res.read()
                return res.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as err:
            text = err.read()
            return err.code, (json.loads(text) if text else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", required=True)
    parser.add_argument("--shard", required=True)
    parser.add_argument("--bridge", default="http://127.0.0.1:6390")
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    bridge = Bridge(args.bridge, args.token)
    lease_path = "/v1/shards/%s/lease" % args.shard

    token = None          # the fencing token while active
    deadline = 0.0        # monotonic time at which we must stop acting
    stopping = []
    standby_behind = None  # (reason, holder) last reported, to log changes only
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    log("start", agent=args.id, shard=args.shard)

    while not stopping:
        if token is not None and time.monotonic() >= deadline:
            log("lost", reason="deadline", token=token)   # stop acting, without asking anyone
            token = None
        sent = time.monotonic()
        body = {"agent": args.id} if token is None else {"agent": args.id, "token": token}
        try:
            status, answer = bridge.call("POST", lease_path, body)
        except OSError as err:
            log("bridge-error", error=str(err))
            time.sleep(0.5)
            continue
        if status == 200:
            ttl = answer["ttl_ms"] / 1000.0
            deadline = sent + 2 * ttl / 3
            if token != answer["token"]:
                token, standby_behind = answer["token"], None
                log("active", token=token, ttl_ms=answer["ttl_ms"])
                _, mine = bridge.call("GET", "/v1/agents/%s/nodes?token=%d" % (args.id, token))
                log("nodes", count=len(mine["nodes"]), token=token)
            wait = ttl / 3
        elif status == 409:
            error = answer["errors"][0]
            if token is not None:
                log("lost", reason=error["code"], token=token)
                token = None
            else:
                behind = (error["code"], (error.get("lease") or {}).get("holder"))
                if behind != standby_behind:
                    standby_behind = behind
                    log("standby", holder=behind[1], reason=behind[0])
            wait = min(error.get("retry_after_ms", 500) / 1000.0, 0.5)
        else:
            log("bridge-error", status=status, answer=answer)
            wait = 1.0
        end = time.monotonic() + wait
        while not stopping and time.monotonic() < end:
            time.sleep(min(0.05, end - time.monotonic()) if end > time.monotonic() else 0)

    if token is not None:
        status, _ = bridge.call("DELETE", lease_path, {"agent": args.id, "token": token})
        log("released" if status == 204 else "release-failed", token=token, status=status)
    return 0


if __name__ == "__main__":
    sys.exit(main())

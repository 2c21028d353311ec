"""The webhook's signature, exactly as the bridge checks it (src/inspection/signature.ts)."""

from __future__ import annotations

import hashlib
import hmac


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 over ``"<timestamp>.<raw body>"`` with the shared secret, hex.

    The one place the signed string is spelled out: should the bridge come to sign the
    delivery id as well, this function and its TypeScript twin change together.
    """
    signed = timestamp.encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), signed, hashlib.sha256).hexdigest()


def signed_headers(secret: str, body: bytes, now_s: float, delivery: str) -> dict[str, str]:
    """The headers that sign ``body`` at ``now_s`` (seconds since the epoch).

    The bridge refuses a timestamp more than 300 s from its own clock, so ``now_s`` is the
    time of sending, not of the inspection.
    """
    timestamp = str(int(now_s))
    return {
        "X-Shardbridge-Timestamp": timestamp,
        "X-Shardbridge-Signature": "sha256=" + webhook_signature(secret, timestamp, body),
        "X-Shardbridge-Delivery": delivery,
    }

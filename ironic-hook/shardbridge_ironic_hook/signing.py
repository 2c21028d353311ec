"""The webhook's signature, exactly as the bridge checks it (src/contracts/webhook-signature.ts)."""

from __future__ import annotations

import hashlib
import hmac


def webhook_signature(secret: str, timestamp: str, delivery: str, body: bytes) -> str:
    """HMAC-SHA256 over ``"<timestamp>\\n<delivery id>\\n<raw body>"`` with the shared secret, hex.

    The one place the signed string is spelled out, the twin of ``webhookSignature`` in the
    bridge (src/contracts/webhook-signature.ts): the delivery id is signed too, so a replay under
    another id does not match. Neither a timestamp nor a delivery id holds a newline.
    """
    signed = timestamp.encode("ascii") + b"\n" + delivery.encode("ascii") + b"\n" + body
    return hmac.new(secret.encode("utf-8"), signed, hashlib.sha256).hexdigest()


def signed_headers(secret: str, body: bytes, now_s: float, delivery: str) -> dict[str, str]:
    """The headers that sign ``body`` at ``now_s`` (seconds since the epoch).

    The bridge refuses a timestamp more than 300 s from its own clock, so ``now_s`` is the
    time of sending, not of the inspection.
    """
    timestamp = str(int(now_s))
    return {
        "X-Shardbridge-Timestamp": timestamp,
        "X-Shardbridge-Signature": "sha256=" + webhook_signature(secret, timestamp, delivery, body),
        "X-Shardbridge-Delivery": delivery,
    }

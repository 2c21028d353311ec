"""One inspection posted to the bridge's webhook: its body, its delivery id, the POST."""

from __future__ import annotations

import datetime
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shardbridge_ironic_hook.signing import signed_headers

WEBHOOK_PATH = "/v1/inspector/webhook"
#: The most of an answer read: the bridge answers a few hundred bytes; a proxy's error page may be long.
ANSWER_LIMIT = 16 * 1024
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@dataclass(frozen=True)
class Inspection:
    """The webhook body for one node's inspection, and the delivery id that names it."""

    node: str
    finished_at: str
    delivery: str
    body: bytes


def inspection_delivery(
    node: str, inventory: Mapping[str, Any], plugin_data: Mapping[str, Any], at_ms: int
) -> Inspection:
    """``{"kind":"inspection",...}`` for ``node``, its ``finished_at`` being ``at_ms`` (ms since the epoch).

    ``pci_devices`` comes from the plugin data, where the ramdisk puts it (anything but a
    list there is sent as none). The delivery id has the form ``inspection-watch`` gives
    (``ironic-inspection.<uuid>.<ms>``) and is made once per inspection, so a repeat of
    this delivery is answered from the bridge's memory and never applied twice.
    """
    at = EPOCH + datetime.timedelta(milliseconds=at_ms)
    finished_at = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    pci_devices = plugin_data.get("pci_devices")
    payload = {
        "kind": "inspection",
        "node": node,
        "finished_at": finished_at,
        "data": {
            "inventory": inventory,
            "pci_devices": pci_devices if isinstance(pci_devices, list) else [],
        },
    }
    body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    return Inspection(node, finished_at, f"ironic-inspection.{node}.{at_ms}", body)


@dataclass(frozen=True)
class Answer:
    """What the bridge answered: its status, its body (JSON, or the text), whether it was a replay."""

    status: int
    body: Any
    replay: bool

    def summary(self) -> str:
        """One line for the conductor's log: the deltas applied, or the bridge's errors."""
        if self.status == 200 and isinstance(self.body, dict):
            applied = self.body.get("applied") or []
            changes = " ".join(applied) if applied else "nothing to change"
            return f"200{' (a replay)' if self.replay else ''}: {changes}"
        errors = self.body.get("errors") if isinstance(self.body, dict) else None
        if isinstance(errors, list) and errors:
            details = "; ".join(f"{e.get('code')}: {e.get('detail')}" for e in errors if isinstance(e, dict))
            return f"{self.status} {details}"
        return f"{self.status} {str(self.body)[:300]}"


def post(
    url: str,
    token: str,
    secret: str,
    inspection: Inspection,
    timeout_s: float,
    cafile: str | None = None,
    now_s: Callable[[], float] = time.time,
) -> Answer:
    """POST ``inspection`` to the bridge at ``url``, signed, as an inspector-role caller.

    ``timeout_s`` bounds the connect and each read (urllib's timeout). An HTTP error is an
    ``Answer``; the bridge unreachable, refusing connections or silent past the timeout
    raises ``OSError`` (``urllib.error.URLError``, ``TimeoutError``), a broken answer
    ``http.client.HTTPException``.
    """
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        **signed_headers(secret, inspection.body, now_s(), inspection.delivery),
    }
    request = urllib.request.Request(
        url.rstrip("/") + WEBHOOK_PATH, data=inspection.body, headers=headers, method="POST"
    )
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            return _answer(response.status, response.headers, response.read(ANSWER_LIMIT))
    except urllib.error.HTTPError as error:
        with error:
            return _answer(error.code, error.headers, error.read(ANSWER_LIMIT))


def _answer(status: int, headers: Mapping[str, str], raw: bytes) -> Answer:
    text = raw.decode("utf-8", errors="replace")
    try:
        body: Any = json.loads(text) if text else None
    except ValueError:
        body = text
    return Answer(status, body, headers.get("X-Shardbridge-Replay") == "true")

"""The inspection hook itself: entry point ``shardbridge`` in ``ironic.inspection.hooks``.

Enable it after Ironic's own hooks, ``[inspector] hooks = $default_hooks,shardbridge``, and
set the ``[shardbridge]`` options below in the conductor's ironic.conf.
"""

from __future__ import annotations

import http.client
import socket
import time
import urllib.error
from collections.abc import Mapping
from typing import Any

from ironic.drivers.modules.inspector.hooks import base
from oslo_config import cfg
from oslo_log import log

from shardbridge_ironic_hook import delivery

CONF = cfg.CONF
LOG = log.getLogger(__name__)
GROUP = "shardbridge"

OPTS = [
    cfg.URIOpt(
        "url",
        schemes=["http", "https"],
        help="The bridge's base URL, e.g. http://bridge.example:6390; the hook posts to "
        "<url>/v1/inspector/webhook.",
    ),
    cfg.StrOpt("token", secret=True, help="A bearer token of the bridge's inspector role (or token_file)."),
    cfg.StrOpt(
        "token_file",
        help="A file that holds the inspector token, read at every inspection: a new token needs no restart.",
    ),
    cfg.StrOpt(
        "secret",
        secret=True,
        help="The webhook's HMAC secret, the bridge's --inspector-secret (or secret_file).",
    ),
    cfg.StrOpt("secret_file", help="A file that holds the webhook secret, read at every inspection."),
    cfg.FloatOpt(
        "timeout",
        default=5.0,
        min=0.1,
        max=60.0,
        help="Seconds the connect and each read of the answer may wait. The conductor holds "
        "the node while the hook waits; past this the inspection goes on without the bridge.",
    ),
    cfg.StrOpt("cafile", help="CA bundle that verifies an https url (default: the system's)."),
]
CONF.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """The options for oslo-config-generator (entry point in ``oslo.config.opts``)."""
    return [(GROUP, OPTS)]


def _check_one_of(options: Any, name: str) -> None:
    """Exactly one of the option ``name`` and ``<name>_file`` is set."""
    if (getattr(options, name) is None) == (getattr(options, f"{name}_file") is None):
        raise ValueError(f"[{GROUP}] set one of {name} and {name}_file")


def _credential(options: Any, name: str) -> str:
    """The option ``name``, or the stripped content of the file ``<name>_file`` names."""
    _check_one_of(options, name)
    value = getattr(options, name)
    if value is not None:
        return value
    with open(getattr(options, f"{name}_file"), encoding="utf-8") as file:
        return file.read().strip()


class ShardbridgeHook(base.InspectionHook):
    """Hands the inspection to shardbridge while the conductor still holds the node.

    It posts the inventory and the ramdisk's ``pci_devices``, signed, to the bridge's
    webhook; the bridge's trait rules turn them into the node's traits, which it then
    writes to Ironic and feeds to the shard's nova-compute.

    It runs as a main hook (``__call__``), not in ``preprocess``: main hooks run only once
    every preprocess step, Ironic's sanity checks among them, has passed, so a result the
    ramdisk reported as failed never reaches the bridge. Listed last, it also runs after
    Ironic's own hooks have accepted the data.

    Best effort by design: a bridge that is down, slow, or refuses the data (any answer but
    200) costs the inspection a warning in the conductor's log and, when silent, the
    ``timeout`` (urllib's: the connect and each read), never the inspection itself. It
    does not retry: the node stays locked while the hook waits, and the bridge's own
    fallback brings the same data once the inspection ends (``serve
    --ironic-notifications``, or ``inspection-watch``).
    """

    def __init__(self) -> None:
        # A hook enabled but not configured keeps the conductor from coming up, with this
        # message in its log, rather than warning at every inspection.
        if CONF.shardbridge.url is None:
            raise ValueError(f"[{GROUP}] url is not set")
        _check_one_of(CONF.shardbridge, "token")
        _check_one_of(CONF.shardbridge, "secret")

    def __call__(self, task: Any, inventory: Mapping[str, Any], plugin_data: Mapping[str, Any]) -> None:
        """Post this inspection to the bridge; log the outcome; never raise."""
        node = task.node.uuid
        options = CONF.shardbridge
        started = time.monotonic()
        context: dict[str, Any] = {"node": node, "url": options.url}
        try:
            # The inspection is not finished while hooks run (Ironic stamps
            # inspection_finished_at after them): its time is the conductor's now, UTC,
            # when the data is processed. A later inspection of the node is later still.
            inspection = delivery.inspection_delivery(
                node, inventory, plugin_data, time.time_ns() // 1_000_000
            )
            answer = delivery.post(
                options.url,
                _credential(options, "token"),
                _credential(options, "secret"),
                inspection,
                options.timeout,
                options.cafile,
            )
        except (OSError, ValueError, http.client.HTTPException) as error:
            self._not_delivered(context, _reason(error, options.timeout), started)
            return
        except Exception:  # noqa: BLE001 - a fault of this hook must not fail the inspection either
            LOG.warning("shardbridge: the hook failed for node %(node)s", context, exc_info=True)
            return
        context.update(summary=answer.summary(), ms=_ms_since(started), delivery=inspection.delivery)
        if answer.status == 200:
            LOG.info(
                "shardbridge: inspection of node %(node)s delivered as %(delivery)s in %(ms)d ms, "
                "the bridge answered %(summary)s",
                context,
            )
            return
        hint = " (load it: shardbridge ironic-sync)" if answer.status == 404 else ""
        LOG.warning(
            "shardbridge: the bridge at %(url)s refused the inspection of node %(node)s after "
            "%(ms)d ms: %(summary)s%(hint)s. The inspection goes on.",
            {**context, "hint": hint},
        )

    @staticmethod
    def _not_delivered(context: dict[str, Any], reason: str, started: float) -> None:
        LOG.warning(
            "shardbridge: inspection of node %(node)s not delivered to %(url)s after %(ms)d ms: "
            "%(reason)s. The inspection goes on; the bridge's fallback "
            "(serve --ironic-notifications, inspection-watch) brings its traits.",
            {**context, "reason": reason, "ms": _ms_since(started)},
        )


def _reason(error: Exception, timeout_s: float) -> str:
    """Why a delivery failed, in words: urllib wraps a refused or timed-out connect in URLError."""
    cause: object = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(cause, (TimeoutError, socket.timeout)):
        return f"no answer within {timeout_s:g} s"
    return f"{type(cause).__name__}: {cause}" if isinstance(cause, BaseException) else str(cause)


def _ms_since(started: float) -> int:
    return round((time.monotonic() - started) * 1000)

"""An Ironic inspection hook that hands each inspection to shardbridge's webhook.

``signing`` and ``delivery`` use only the standard library; ``hook`` is the part that
imports Ironic and oslo.config, so the signing can be checked without a conductor.
"""

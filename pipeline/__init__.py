"""Fenceline protocol core: durable jobs, leases, retries, outbox, validation, delivery.

Nothing in this package imports Ray: the cluster runtime (``cluster/``) and the
Serve deployments (``deployments/``) wrap these plain classes.
"""

"""Deploy one Serve application and wait, bounded, until it runs.

``serve.run`` blocks forever when replicas cannot be scheduled (a 2-core machine
asked for more CPUs than it has, a GPU pool on a CPU node), so every Fenceline
app is deployed without waiting and then polled against a deadline; a failure
names each deployment's status and message.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray.serve import Application


def run_app(
    app: Application,
    name: str,
    *,
    route_prefix: str | None,
    timeout_s: float,
    poll_s: float = 0.5,
) -> None:
    """Deploy ``app`` as ``name`` on the connected Ray cluster; return once RUNNING.

    Raises:
        TimeoutError: not RUNNING within ``timeout_s``; the message describes why.
        RuntimeError: Serve reported DEPLOY_FAILED; the message carries its reason.
    """
    from ray import serve
    from ray.serve.api import RunTarget
    from ray.serve.schema import ApplicationStatus

    serve.run_many(
        [RunTarget(target=app, name=name, route_prefix=route_prefix)],
        wait_for_ingress_deployment_creation=False,
        wait_for_applications_running=False,
    )
    deadline = time.monotonic() + timeout_s
    while True:
        status = serve.status().applications.get(name)
        if status is not None and status.status == ApplicationStatus.RUNNING:
            return
        if status is not None and status.status == ApplicationStatus.DEPLOY_FAILED:
            raise RuntimeError(f"{name} app failed to deploy: {describe(status)}")
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{name} app not running after {timeout_s:.0f} s: {describe(status)}"
            )
        time.sleep(poll_s)


def describe(status: Any) -> str:
    """The app's and each deployment's status and message, for a failed wait."""
    if status is None:
        return "application not registered"
    parts = [f"app {status.status}: {status.message}".rstrip(": ")]
    for name, deployment in sorted(status.deployments.items()):
        parts.append(f"{name} {deployment.status}: {deployment.message}".rstrip(": "))
    return "; ".join(parts)

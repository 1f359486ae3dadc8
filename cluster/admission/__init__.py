"""Admission on Ray: one actor per scope, the client drivers reach it with, the
driver's gates over that client, and the engine scopes a pool's attempts ask.

Bottom to top: ``engine_scopes`` (scopes and routes, plain data), ``client``
(the unreachable behaviour), ``actor`` (the scope's state behind a named actor),
``gates`` (the :class:`~pipeline.admission.AdmissionGate` implementations).
Other packages import these names from here, never from a module inside.
"""

from cluster.admission.actor import LEDGER_RETRY_SECONDS, AdmissionActor, admission_actor
from cluster.admission.client import (
    ACTOR_PREFIX,
    AdmissionClient,
    AdmissionClientMetrics,
    EmergencyAllowance,
    LocalActorHandle,
    actor_name,
)
from cluster.admission.engine_scopes import (
    KV_HEADROOM,
    EngineScope,
    PoolRoute,
    engine_scope_name,
    engine_scopes_for,
    route_scope,
)
from cluster.admission.gates import ActorGate, RoutedGate

__all__ = [
    "ACTOR_PREFIX",
    "KV_HEADROOM",
    "LEDGER_RETRY_SECONDS",
    "ActorGate",
    "AdmissionActor",
    "AdmissionClient",
    "AdmissionClientMetrics",
    "EmergencyAllowance",
    "EngineScope",
    "LocalActorHandle",
    "PoolRoute",
    "RoutedGate",
    "actor_name",
    "admission_actor",
    "engine_scope_name",
    "engine_scopes_for",
    "route_scope",
]

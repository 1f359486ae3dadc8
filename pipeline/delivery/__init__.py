"""ERP delivery: the delivery state machine and dispatcher, tenant endpoints,
webhook signing, the egress guard and client, the retry policy, and the ERP's
commercial acknowledgements.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.delivery.acknowledgements import (
    ACK_TRANSITIONS,
    EVENT_ACKNOWLEDGEMENT,
    MAX_ACK_BODY_BYTES,
    MAX_ACK_WINDOW_SECONDS,
    MIN_ACK_WINDOW_SECONDS,
    OUTCOMES,
    AckMetrics,
    AcknowledgementInbox,
    AckReceipt,
    AckState,
    OverdueAcknowledgements,
)
from pipeline.delivery.deliveries import (
    DeliveryState,
    DeliveryStore,
    delivery_settle_hook,
    job_store,
)
from pipeline.delivery.delivery_log import DeliveryLog, LogFilter, LogPosition, refusal
from pipeline.delivery.dispatcher import AfterResponse, DeliveryDispatcher
from pipeline.delivery.egress_client import EgressClient
from pipeline.delivery.endpoints import (
    DEFAULT_EVENT_TYPES,
    EVENT_TYPE_PATTERN,
    MAX_EVENT_TYPES,
    Endpoint,
    EndpointRegistry,
    IssuedSecret,
    SecretBox,
    guard_from_settings,
)
from pipeline.delivery.policy import DeliveryConfig
from pipeline.delivery.probe import EVENT_TEST, TEST_ID_PREFIX, EndpointProbe, ProbeResult
from pipeline.delivery.signing import VerificationKey, Verifier
from pipeline.delivery.verification import (
    CHALLENGE_ID_PREFIX,
    EVENT_VERIFICATION,
    ChallengeResult,
    EndpointChallenger,
)

__all__ = [
    "ACK_TRANSITIONS",
    "CHALLENGE_ID_PREFIX",
    "DEFAULT_EVENT_TYPES",
    "EVENT_ACKNOWLEDGEMENT",
    "EVENT_TEST",
    "EVENT_TYPE_PATTERN",
    "EVENT_VERIFICATION",
    "MAX_ACK_BODY_BYTES",
    "MAX_ACK_WINDOW_SECONDS",
    "MAX_EVENT_TYPES",
    "MIN_ACK_WINDOW_SECONDS",
    "OUTCOMES",
    "TEST_ID_PREFIX",
    "AckMetrics",
    "AckReceipt",
    "AckState",
    "AcknowledgementInbox",
    "AfterResponse",
    "ChallengeResult",
    "DeliveryConfig",
    "DeliveryDispatcher",
    "DeliveryLog",
    "DeliveryState",
    "DeliveryStore",
    "EgressClient",
    "Endpoint",
    "EndpointChallenger",
    "EndpointProbe",
    "EndpointRegistry",
    "IssuedSecret",
    "LogFilter",
    "LogPosition",
    "OverdueAcknowledgements",
    "ProbeResult",
    "SecretBox",
    "VerificationKey",
    "Verifier",
    "delivery_settle_hook",
    "guard_from_settings",
    "job_store",
    "refusal",
]

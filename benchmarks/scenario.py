"""Benchmark scenarios: the YAML schema, loading with clear errors, and the corpus.

A scenario (``benchmarks/scenarios/*.yaml``) names the arrival process, the
tenant mix, the documents, the engine, admission limits, drivers, delivery,
prices, the baselines to run next to the main run and, for GPU runs, the
memory-bandwidth roofline. Every block is validated by pydantic;
:func:`load_scenario` turns a validation failure into :class:`ScenarioError`
whose message names the file and each offending field.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from benchmarks.fake_provider import Latency
from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_invoice
from benchmarks.invoices.plan import SupplierIdentity
from pipeline.jobs.near_duplicates import normalise_number

SCENARIO_DIR = Path(__file__).parent / "scenarios"
ROOT = Path(__file__).resolve().parent.parent
#: Engine kinds a scenario may name.
EngineKind = Literal["fake", "vllm-cpu", "vllm-gpu"]
ENGINE_KINDS: tuple[str, ...] = get_args(EngineKind)
#: Arrival processes the load generator draws (:func:`benchmarks.load.generator.schedule`).
ArrivalProcess = Literal["poisson", "gamma", "ramp", "burst"]
#: Baselines the runner knows (run after the main run, side by side).
BASELINES = ("pipeline_vs_direct", "store_vs_raw", "serve_vs_starlette")


class ArrivalSpec(BaseModel):
    """The arrival process of a scenario (the ``arrival:`` block of its YAML)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    process: ArrivalProcess = "poisson"
    #: Mean arrivals per second (start rate for ``ramp``).
    rate: float = Field(1.0, gt=0)
    #: ``ramp`` only: the rate reached at the end of the duration.
    rate_end: float | None = Field(None, gt=0)
    #: ``gamma`` only: coefficient of variation of the gaps.
    cv: float = Field(1.0, gt=0)
    #: ``burst`` only: how many requests at t = 0.
    count: int = Field(0, ge=0)
    #: Seconds of arrivals (ignored for ``burst``).
    duration_s: float = Field(10.0, gt=0)

    @model_validator(mode="after")
    def _complete(self) -> ArrivalSpec:
        if self.process == "burst" and self.count <= 0:
            raise ValueError("a burst needs count > 0")
        if self.process == "ramp" and self.rate_end is None:
            raise ValueError("a ramp needs rate_end")
        return self


class ScenarioError(ValueError):
    """A scenario file is missing or invalid; the message says which field and why."""


class TenantSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    #: Share of arrivals, and the fairness weight of the tenant.
    weight: float = Field(1.0, gt=0)


PlantKind = Literal["amendment", "near_duplicate", "credit_note"]


class DocumentSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    #: Distinct invoices generated (requests cycle through them).
    corpus: int = Field(100, ge=1)
    max_line_items: int = Field(8, ge=1, le=200)
    #: Variants cycled through the corpus; non-clean ones end in REVIEW_REQUIRED.
    variants: tuple[Variant, ...] = (Variant.CLEAN,)
    #: Share of arrivals planted as documents derived from an earlier invoice of the
    #: run (benchmarks.load.plants): ``amendment``, ``near_duplicate``, ``credit_note``.
    plants: dict[PlantKind, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _plants(self) -> DocumentSpec:
        if any(v < 0 for v in self.plants.values()) or sum(self.plants.values()) > 0.5:
            raise ValueError("plants: shares must be >= 0 and together at most 0.5")
        return self


class EngineSpec(BaseModel):
    """The engine the drivers call.

    ``fake``: :mod:`benchmarks.fake_provider` in its own process with
    ``latency`` and provider-side ``rpm``/``tpm``. ``vllm-cpu`` / ``vllm-gpu``:
    the inference app (context-length router + vLLM pools) from ``pools_file``
    on a local Ray cluster, as ``fenceline up`` deploys it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: EngineKind = "fake"
    latency: Latency = Field(default_factory=lambda: Latency(dist="fixed", a=0.2))
    #: Provider-side limits (the fake answers 429 above them).
    rpm: int | None = None
    tpm: int | None = None
    #: vLLM kinds: the pools file (relative to the repository root).
    pools_file: str | None = None
    #: Output cap per attempt (the drivers' ``max_output_tokens``); None: per document.
    max_output_tokens: int | None = Field(None, ge=1)
    attempt_timeout_s: float = Field(45.0, gt=0)
    #: Logical CPUs for the local Ray head (vLLM kinds).
    ray_cpus: int = Field(4, ge=1)
    deploy_timeout_s: float = Field(600.0, gt=0)

    @model_validator(mode="after")
    def _pools(self) -> EngineSpec:
        if self.kind != "fake" and self.pools_file is None:
            raise ValueError(f"engine kind {self.kind!r} needs pools_file (a pools YAML)")
        if self.pools_file is not None and not (ROOT / self.pools_file).exists():
            raise ValueError(f"pools_file {self.pools_file!r} does not exist under {ROOT}")
        return self


class AdmissionSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    rpm: int | None = None
    tpm: int | None = None
    concurrency: int | None = None


class DriverSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    count: int = Field(2, ge=1)
    concurrency: int = Field(8, ge=1)


class PricingSpec(BaseModel):
    """Price per million tokens (Decimal; quote numbers as strings in YAML)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    currency: str = "USD"
    prompt_per_million: Decimal = Field(Decimal("0"), ge=0)
    completion_per_million: Decimal = Field(Decimal("0"), ge=0)


class DeliverySpec(BaseModel):
    """Signed delivery to the reference ERP receiver on loopback, one endpoint per tenant."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    #: Off unless asked for: a capacity check measures the job drain alone.
    enabled: bool = False
    #: After the jobs settle, how long to wait for deliveries to finish.
    timeout_s: float = Field(60.0, gt=0)


class RooflineSpec(BaseModel):
    """Memory-bandwidth roofline of one accelerator for decode (GPU profiles).

    Each decode step reads every weight once (shared by the batch) plus each
    sequence's KV cache; tokens/s per sequence <= bandwidth / bytes read per step.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    device: str
    bandwidth_tb_s: float = Field(gt=0)
    params_billion: float = Field(gt=0)
    bytes_per_param: float = Field(2.0, gt=0)
    #: KV bytes per token of context (0: weights only).
    kv_bytes_per_token: float = Field(0.0, ge=0)


class BaselineSpec(BaseModel):
    """Baselines run after the main run, each side by side in this process.

    YAML may give just the list (``baselines: [store_vs_raw, ...]``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    run: tuple[Literal["pipeline_vs_direct", "store_vs_raw", "serve_vs_starlette"], ...] = ()
    #: pipeline_vs_direct: documents sent both ways, requests in flight on the direct side.
    direct_documents: int = Field(40, ge=1)
    #: store_vs_raw: jobs per variant and workers.
    store_jobs: int = Field(300, ge=1)
    store_workers: int = Field(4, ge=1)
    store_batch: int = Field(8, ge=1)
    #: serve_vs_starlette: seconds of closed-loop load per target, and its concurrency.
    intake_seconds: float = Field(4.0, gt=0)
    #: Unmeasured load before each target's measured seconds (Serve's proxy warms up).
    intake_warmup_s: float = Field(2.0, ge=0)
    intake_concurrency: int = Field(8, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _from_list(cls, data: Any) -> Any:
        if isinstance(data, list | tuple):
            return {"run": list(data)}
        return data


class Scenario(BaseModel):
    """A benchmark scenario (one YAML file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    description: str = ""
    seed: int = 0
    arrival: ArrivalSpec
    tenants: tuple[TenantSpec, ...] = (TenantSpec(name="acme"),)
    documents: DocumentSpec = Field(default_factory=DocumentSpec)
    engine: EngineSpec = Field(default_factory=EngineSpec)
    admission: AdmissionSpec = Field(default_factory=AdmissionSpec)
    drivers: DriverSpec = Field(default_factory=DriverSpec)
    delivery: DeliverySpec = Field(default_factory=DeliverySpec)
    pricing: PricingSpec = Field(default_factory=PricingSpec)
    baselines: BaselineSpec = Field(default_factory=BaselineSpec)
    roofline: RooflineSpec | None = None
    #: Attempts per job (Settings.max_attempts).
    max_attempts: int = Field(5, ge=1)
    #: Job deadline given at submission (goodput counts completions before it).
    deadline_s: float = Field(600.0, gt=0)
    #: After the last arrival, how long to wait for the backlog to settle.
    drain_timeout_s: float = Field(300.0, gt=0)
    #: Compare the capacity model's predicted drain time with the measured one.
    capacity_check: bool = False
    #: Run with the duplicate-invoice protection on (exact and possible duplicates,
    #: docs/delivery.md). Off by default: requests cycle through the corpus, so an
    #: invoice arrives many times by design; with it on, give a corpus at least as
    #: large as the arrivals, or the repeats are held for review.
    duplicate_protection: bool = False
    sample_every_s: float = Field(0.5, gt=0)
    #: Per engine kind, fields that replace this scenario's when ``--engine`` picks
    #: that kind (merged key by key), so one scenario is sized for each engine.
    profiles: dict[EngineKind, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        names = [t.name for t in self.tenants]
        if len(set(names)) != len(names):
            raise ValueError(f"tenant names must be unique, got {names}")
        if not names:
            raise ValueError("at least one tenant is needed")
        if self.capacity_check and self.engine.kind != "fake":
            raise ValueError("capacity_check needs engine kind 'fake' (a configured latency)")
        return self


def format_errors(exc: ValidationError) -> str:
    """One line per error: ``field.path: message``."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(scenario)"
        lines.append(f"  {where}: {err['msg']}")
    return "\n".join(lines)


def parse_scenario(data: Any, origin: str = "<scenario>") -> Scenario:
    """Validate a scenario mapping; :class:`ScenarioError` lists every bad field."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{origin}: a scenario is a mapping, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(f"{origin}: invalid scenario\n{format_errors(exc)}") from None


def known_scenarios() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def load_scenario(name_or_path: str) -> Scenario:
    """A scenario by name (``smoke``) or by path to its YAML file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SCENARIO_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        raise ScenarioError(f"no scenario {name_or_path!r} (known: {', '.join(known_scenarios())})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{path}: not valid YAML: {exc}") from None
    return parse_scenario(data, str(path))


def with_engine(scenario: Scenario, kind: str) -> Scenario:
    """The scenario with another engine kind (``--engine``); vLLM kinds get default pools."""
    if kind not in ENGINE_KINDS:
        raise ScenarioError(f"unknown engine kind {kind!r} (known: {', '.join(ENGINE_KINDS)})")
    profile: dict[str, Any] = {}
    for named, fields in scenario.profiles.items():
        if named == kind:
            profile = fields
    data = merged(scenario.model_dump(), profile)
    data["profiles"] = {}
    engine = data["engine"]
    engine["kind"] = kind
    if kind == "vllm-cpu" and engine.get("pools_file") is None:
        engine["pools_file"] = "benchmarks/pools/cpu-smoke.yaml"
    if kind == "vllm-gpu" and engine.get("pools_file") is None:
        engine["pools_file"] = "benchmarks/pools/gpu-single.yaml"
    data["name"] = f"{scenario.name}-{kind}"
    return parse_scenario(data, f"{scenario.name} with engine {kind}")


def merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` applied: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in override.items():
        current = out.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            out[key] = merged(current, value)
        else:
            out[key] = value
    return out


def consistent_corpus(
    count: int,
    *,
    seed: int,
    variants: tuple[Variant, ...],
    max_line_items: int,
    anchor: date | None,
) -> list[GeneratedInvoice]:
    """``count`` invoices whose suppliers form consistent master data.

    The generator draws supplier names from a finite list, so two seeds can name
    the same supplier with different VAT ids. A later invoice under a name
    already drawn is issued by that same supplier (its VAT id, IBAN, address:
    :func:`~benchmarks.invoices.plan.adopt_supplier`), as a tenant's repeat
    suppliers are; where the name was drawn in another country the seed is
    skipped. So master data keyed by VAT id holds one record per name and a clean
    invoice validates, at any corpus size. A supplier never issues one number twice:
    a seed whose number (as duplicate detection reads it) its supplier already used
    is skipped, so no invoice of the corpus is a version or duplicate of another.
    Deterministic in its arguments.
    """
    out: list[GeneratedInvoice] = []
    known: dict[str, SupplierIdentity] = {}
    numbers: set[tuple[str, str]] = set()
    i = 0
    while len(out) < count:
        if i > 50 * count + 100:
            raise RuntimeError("could not draw a consistent corpus")
        variant = variants[len(out) % len(variants)]
        inv = generate_invoice(seed + i, variant, max_line_items=max_line_items, anchor=anchor)
        i += 1
        first = known.get(inv.identity.name)
        if first is not None and first != inv.identity:
            if first.country != inv.identity.country:
                continue
            inv = generate_invoice(
                seed + i - 1, variant, max_line_items=max_line_items, anchor=anchor, supplier=first
            )
        assert inv.truth.invoice_number is not None
        number = (inv.identity.vat_master, normalise_number(inv.truth.invoice_number.value))
        if number in numbers:
            continue
        numbers.add(number)
        known.setdefault(inv.identity.name, inv.identity)
        out.append(inv)
    return out


def scenario_corpus(scenario: Scenario) -> list[GeneratedInvoice]:
    """The scenario's invoices (deterministic; the fake process regenerates the same)."""
    return consistent_corpus(
        scenario.documents.corpus,
        seed=scenario.seed * 1000,
        variants=scenario.documents.variants,
        max_line_items=scenario.documents.max_line_items,
        anchor=date.today(),
    )

"""What tokens cost: a prompt price and a completion price, per model.

Providers bill a call's prompt (input) and completion (output) tokens at two
prices, and each model has its own. :class:`Prices` holds the default pair
(``FENCELINE_PROMPT_PRICE_PER_1K`` / ``FENCELINE_COMPLETION_PRICE_PER_1K``, each
falling back to ``FENCELINE_TOKEN_PRICE_PER_1K``) and one pair per model
(``FENCELINE_MODEL_PRICES``, JSON: ``{"MODEL": {"prompt_per_1k": "0.0005",
"completion_per_1k": "0.0015"}}``).

A model is named as the attempt row records who answered (``job_attempts.engine``):
a local pool's name (``long``), or a hosted provider's model, which the attempt
records as ``openai-compatible:MODEL``; a price keyed ``MODEL`` applies to both
spellings. An attempt that recorded no model (its call never answered) and a
model without a price of its own are charged at the default pair.

Money is :class:`~decimal.Decimal`; a cost is rounded up to 1e-6 once, after the
two parts are added (the SQL of ``spend_charge_attempts`` does the same), so with
equal prices a cost is exactly the single-price cost of the tokens together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal

from pydantic import BaseModel, ConfigDict, Field

MICRO = Decimal("0.000001")
#: How the hosted-provider engine names itself on an attempt row.
PROVIDER_ENGINE_PREFIX = "openai-compatible:"


class ModelPrice(BaseModel):
    """One model's prices per 1,000 tokens, in the budget's currency."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt_per_1k: Decimal = Field(ge=0)
    completion_per_1k: Decimal = Field(ge=0)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        """Spend for the tokens at these prices, rounded up to 1e-6."""
        raw = (
            Decimal(prompt_tokens) * self.prompt_per_1k
            + Decimal(completion_tokens) * self.completion_per_1k
        ) / Decimal(1000)
        return raw.quantize(MICRO, rounding=ROUND_CEILING)


@dataclass(frozen=True)
class Prices:
    """The default prices and each priced model's."""

    default: ModelPrice
    models: Mapping[str, ModelPrice] = field(default_factory=dict)

    def for_model(self, model: str | None) -> ModelPrice:
        """The prices of ``model`` as an attempt records it; the default when unpriced."""
        if model is None:
            return self.default
        return self.by_recorded_name().get(model, self.default)

    def by_recorded_name(self) -> dict[str, ModelPrice]:
        """Every name an attempt may record for a priced model, with its prices.

        ``MODEL`` also prices ``openai-compatible:MODEL``, unless that spelling has
        a price of its own.
        """
        out = {
            f"{PROVIDER_ENGINE_PREFIX}{m}": p
            for m, p in self.models.items()
            if not m.startswith(PROVIDER_ENGINE_PREFIX)
        }
        out.update(self.models)
        return out

    def sql_arrays(self) -> tuple[list[str], list[Decimal], list[Decimal]]:
        """Names, prompt prices and completion prices as three parallel arrays (the
        charge statement joins them with ``unnest``)."""
        rows = sorted(self.by_recorded_name().items())
        return (
            [name for name, _ in rows],
            [p.prompt_per_1k for _, p in rows],
            [p.completion_per_1k for _, p in rows],
        )

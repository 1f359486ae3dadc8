"""Token prices: a prompt and a completion price per model (pipeline.pricing)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError

from pipeline.pricing import ModelPrice, Prices
from pipeline.settings import Settings
from pipeline.spend import cost_of, estimate_cost


def test_prompt_and_completion_tokens_are_priced_apart_and_rounded_up_once() -> None:
    price = ModelPrice(prompt_per_1k=Decimal("0.0011"), completion_per_1k=Decimal("0.0047"))
    # 333 x 0.0011 + 7 x 0.0047 = 0.3663 + 0.0329 = 0.3992 per 1,000 -> 0.0003992 -> up.
    assert price.cost(333, 7) == Decimal("0.000400")
    assert price.cost(0, 0) == 0


def test_equal_prices_cost_what_one_price_cost() -> None:
    one = Decimal("0.0033")
    price = ModelPrice(prompt_per_1k=one, completion_per_1k=one)
    for prompt, completion in [(1, 1), (101, 37), (2207, 415), (5000, 900)]:
        assert price.cost(prompt, completion) == cost_of(prompt + completion, one)


def test_a_model_is_priced_under_its_name_and_as_the_provider_records_it() -> None:
    a = ModelPrice(prompt_per_1k=Decimal("1"), completion_per_1k=Decimal("2"))
    own = ModelPrice(prompt_per_1k=Decimal("3"), completion_per_1k=Decimal("4"))
    default = ModelPrice(prompt_per_1k=Decimal("5"), completion_per_1k=Decimal("6"))
    prices = Prices(default=default, models={"a": a, "openai-compatible:b": own, "b": a})
    assert prices.for_model("a") is a
    assert prices.for_model("openai-compatible:a") is a
    assert prices.for_model("openai-compatible:b") is own  # its own price wins
    assert prices.for_model("other") is default and prices.for_model(None) is default
    names, prompt, completion = prices.sql_arrays()
    assert dict(zip(names, completion, strict=True))["a"] == Decimal("2")
    assert sorted(names) == names and len(set(names)) == len(names) == 4
    assert dict(zip(names, prompt, strict=True))["openai-compatible:b"] == Decimal("3")


def test_settings_default_prices_fall_back_to_the_token_price() -> None:
    s = Settings(token_price_per_1k=Decimal("0.002"), completion_price_per_1k=Decimal("0.008"))
    assert s.prices().default == ModelPrice(
        prompt_per_1k=Decimal("0.002"), completion_per_1k=Decimal("0.008")
    )
    # The reservation prices the estimate's output reserve as completion tokens.
    tokens = s.output_reserve_tokens + 1000
    assert estimate_cost(tokens, s) == ModelPrice(
        prompt_per_1k=Decimal("0.002"), completion_per_1k=Decimal("0.008")
    ).cost(1000, s.output_reserve_tokens)
    assert estimate_cost(10, s) == s.prices().default.cost(0, 10)


def test_a_negative_or_unknown_price_field_is_refused() -> None:
    with pytest.raises(ValidationError):
        Settings(model_prices={"m": {"prompt_per_1k": "-1", "completion_per_1k": "1"}})
    with pytest.raises(ValidationError):
        Settings(model_prices={"m": {"prompt": "1", "completion_per_1k": "1"}})

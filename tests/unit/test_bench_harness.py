"""The benchmark harness's arithmetic: ratios, consistency, cost, roofline, scenario errors."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from benchmarks.engines.bench_engine import CallTiming, timing_summary
from benchmarks.engines.roofline import roofline_report, roofline_tokens_per_s, step_bytes
from benchmarks.invoices.generator import GeneratedInvoice, Variant, generate_invoice
from benchmarks.load.baselines import direct_concurrency, headline, ratio, round_ratios
from benchmarks.load.collect import InconsistentRun, buckets, check_consistency, cost_report
from benchmarks.scenario import (
    PricingSpec,
    RooflineSpec,
    ScenarioError,
    consistent_corpus,
    known_scenarios,
    load_scenario,
    parse_scenario,
    with_engine,
)
from pipeline.jobs.near_duplicates import normalise_number

MINIMAL: dict[str, Any] = {"name": "t", "arrival": {"process": "burst", "count": 3}}


# ---- baseline ratios -------------------------------------------------------------------


def test_ratio_divides_and_refuses_missing_values() -> None:
    assert ratio(3.0, 2.0) == pytest.approx(1.5)
    assert math.isnan(ratio(1.0, 0.0))
    assert math.isnan(ratio(math.nan, 2.0))


def _pass(seconds: float, p50: float = 1.0, p99: float = 2.0) -> dict[str, float]:
    return {
        "drain_s": seconds,
        "wall_s": seconds,
        "since_submit_p50_s": p50,
        "since_submit_p99_s": p99,
    }


def test_one_round_compares_the_pipeline_with_the_direct_pass_after_it() -> None:
    [only] = round_ratios([_pass(11.0, 2.0)], [_pass(10.0, 1.0)])
    assert only["drain_time"] == pytest.approx(1.1)
    assert only["p50_since_submit"] == pytest.approx(2.0)


def test_rounds_compare_each_pipeline_pass_with_its_neighbouring_directs() -> None:
    # The engine slows down through the run (direct 40 s, 50 s, 60 s): each pipeline
    # pass is measured against the mean of the direct passes on either side.
    directs = [_pass(40.0), _pass(50.0), _pass(60.0)]
    detail = round_ratios([_pass(45.0), _pass(66.0)], directs)
    assert [d["drain_time"] for d in detail] == pytest.approx([1.0, 1.2])


def test_rounds_refuse_a_pass_count_that_does_not_alternate() -> None:
    with pytest.raises(ValueError):
        round_ratios([_pass(1.0)], [_pass(1.0)] * 3)


def test_headline_takes_one_named_ratio_per_baseline_that_ran() -> None:
    baselines = {
        "pipeline_vs_direct": {"ratios": {"drain_time": 1.25, "p50_since_submit": 2.0}},
        "store_vs_raw": {"ratios": {"store_batch_vs_raw": 0.5, "store_single_vs_raw": 0.25}},
    }
    assert headline(baselines) == {
        "pipeline/direct drain time": 1.25,
        "store/raw claim+complete rate": 0.5,
    }


def test_direct_side_gets_the_concurrency_admission_gives_the_pipeline() -> None:
    s = parse_scenario({**MINIMAL, "admission": {"concurrency": 5}, "drivers": {"count": 3}})
    assert direct_concurrency(s) == 5
    s = parse_scenario({**MINIMAL, "drivers": {"count": 2, "concurrency": 3}})
    assert direct_concurrency(s) == 6


# ---- consistency -----------------------------------------------------------------------


def test_consistent_counts_pass() -> None:
    b = buckets({"SUCCEEDED": 5, "REVIEW_REQUIRED": 2, "FAILED_TERMINAL": 1, "READY": 2})
    assert b == {"completed": 5, "review_required": 2, "failed": 1, "pending": 2}
    check_consistency(10, 10, b)


@pytest.mark.parametrize(
    ("admitted", "in_db", "b"),
    [
        (10, 9, {"completed": 5, "review_required": 2, "failed": 1, "pending": 1}),
        (10, 10, {"completed": 5, "review_required": 2, "failed": 1, "pending": 1}),
        (10, 10, {"completed": 12, "review_required": 0, "failed": 0, "pending": -2}),
    ],
)
def test_inconsistent_counts_raise(admitted: int, in_db: int, b: dict[str, int]) -> None:
    with pytest.raises(InconsistentRun, match=f"{admitted} admitted"):
        check_consistency(admitted, in_db, b)


# ---- cost ------------------------------------------------------------------------------


def test_cost_is_decimal_exact_per_completed_job() -> None:
    pricing = PricingSpec(prompt_per_million=Decimal("0.15"), completion_per_million=Decimal("0.6"))
    got = cost_report(pricing, prompt_tokens=1_000_001, completion_tokens=333_333, completed=3)
    # 1,000,001 * 0.15 / 1e6 + 333,333 * 0.6 / 1e6 = 0.15000015 + 0.1999998 = 0.34999995
    assert got["total"] == "0.34999995"
    assert Decimal(got["per_completed_job"]) == Decimal("0.11666665")
    assert got["currency"] == "USD"


def test_cost_per_job_is_none_when_nothing_completed() -> None:
    got = cost_report(PricingSpec(prompt_per_million=Decimal("1")), 500, 0, completed=0)
    assert got["per_completed_job"] is None
    assert got["total"] == "0.00050000"


def test_prices_from_yaml_strings_stay_exact() -> None:
    s = parse_scenario({**MINIMAL, "pricing": {"prompt_per_million": "0.1"}})
    assert s.pricing.prompt_per_million == Decimal("0.1")


# ---- engine timings --------------------------------------------------------------------


def test_timing_summary_uses_vllm_names_and_says_when_ttft_is_whole_response() -> None:
    calls = [
        CallTiming(True, 1.0, 0.2, (0.1, 0.1, 0.1), 100, 4),
        CallTiming(True, 2.0, 0.4, (0.2, 0.2), 100, 3),
        CallTiming(False, 5.0, error="ProviderTimeout"),
    ]
    streamed = timing_summary(calls, streams=True)
    assert streamed["mean_ttft_ms"] == pytest.approx(300.0)
    assert streamed["mean_tpot_ms"] == pytest.approx(150.0)  # mean of per-call means 100, 200
    assert streamed["mean_itl_ms"] == pytest.approx(140.0)
    assert streamed["total_output_tokens"] == 7 and streamed["ok"] == 2
    whole = timing_summary(calls, streams=False)
    assert whole["mean_ttft_ms"] == pytest.approx(1500.0)  # time to the whole response
    assert math.isnan(whole["mean_tpot_ms"])
    assert "no stream" in whole["ttft_source"]


# ---- roofline --------------------------------------------------------------------------

H200_8B = RooflineSpec(device="H200", bandwidth_tb_s=4.8, params_billion=8.0, bytes_per_param=2)


def test_roofline_is_bandwidth_over_weight_bytes_for_one_sequence() -> None:
    got = roofline_tokens_per_s(H200_8B)
    assert got["per_sequence"] == pytest.approx(4.8e12 / 16e9)  # 300 tokens/s
    assert got["total"] == pytest.approx(300.0)


def test_roofline_batch_shares_weights_and_pays_kv_per_sequence() -> None:
    spec = H200_8B.model_copy(update={"kv_bytes_per_token": 131072})
    assert step_bytes(spec, batch=64, context_tokens=1000) == pytest.approx(
        16e9 + 64 * 1000 * 131072
    )
    got = roofline_tokens_per_s(spec, batch=64, context_tokens=1000)
    per_seq = 4.8e12 / (16e9 + 64 * 1000 * 131072)
    assert got["per_sequence"] == pytest.approx(per_seq)
    assert got["total"] == pytest.approx(64 * per_seq)
    with pytest.raises(ValueError):
        roofline_tokens_per_s(spec, batch=0)


def test_roofline_report_compares_measured_decode_rate() -> None:
    result = {
        "engine": {
            "mean_tpot_ms": 10.0,
            "total_output_tokens": 10_000,
            "total_input_tokens": 50_000,
            "ok": 100,
        },
        "duration_s": {"elapsed": 10.0},
    }
    r = roofline_report(H200_8B, result)
    assert r["measured_per_sequence_tok_s"] == pytest.approx(100.0)
    assert r["mean_batch"] == pytest.approx(10.0)  # 10,000 tokens x 10 ms / 10 s
    assert r["fraction_of_roofline_per_sequence"] == pytest.approx(100 / 300)
    assert r["measured_total_tok_s"] == pytest.approx(1000.0)


# ---- scenarios -------------------------------------------------------------------------


def test_shipped_scenarios_load() -> None:
    names = known_scenarios()
    assert {"smoke", "burst2000", "gpu-h200", "gpu-h100"} <= set(names)
    for name in names:
        assert load_scenario(name).name == name


def test_unknown_scenario_lists_the_known_ones() -> None:
    with pytest.raises(ScenarioError, match=r"known: .*smoke"):
        load_scenario("no-such-scenario")


def test_invalid_fields_are_named_in_the_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\narrival: {process: burst, count: 0}\n"
        "drivers: {count: 0}\nbaselines: [pipeline_vs_direct, nope]\nsurprise: 1\n"
    )
    with pytest.raises(ScenarioError) as err:
        load_scenario(str(bad))
    text = str(err.value)
    assert str(bad) in text
    assert "drivers.count" in text
    assert "baselines.run.1" in text
    assert "surprise" in text
    assert "arrival" in text


def test_vllm_engine_needs_a_pools_file() -> None:
    with pytest.raises(ScenarioError, match="needs pools_file"):
        parse_scenario({**MINIMAL, "engine": {"kind": "vllm-cpu"}})
    with pytest.raises(ScenarioError, match="does not exist"):
        parse_scenario({**MINIMAL, "engine": {"kind": "vllm-cpu", "pools_file": "nope.yaml"}})


def test_engine_override_gives_vllm_the_default_pools() -> None:
    s = with_engine(load_scenario("smoke"), "vllm-cpu")
    assert s.engine.kind == "vllm-cpu"
    assert s.engine.pools_file == "benchmarks/pools/cpu-smoke.yaml"
    # smoke's vllm-cpu profile sizes the run for the CPU engine ...
    assert s.engine.max_output_tokens == 320 and s.max_attempts == 1
    assert s.baselines.run == ("pipeline_vs_direct",)
    assert [t.name for t in s.tenants] == ["acme", "globex"]
    # ... and leaves what it does not name as it was.
    assert s.documents.max_line_items == 2 and s.admission.rpm == 3000
    assert s.profiles == {}
    plain = with_engine(parse_scenario(MINIMAL), "vllm-cpu")  # no profile: engine only
    assert plain.arrival == parse_scenario(MINIMAL).arrival
    with pytest.raises(ScenarioError, match="unknown engine kind"):
        with_engine(s, "tpu")


def test_capacity_check_needs_the_fake_engine() -> None:
    with pytest.raises(ScenarioError, match="capacity_check"):
        parse_scenario(
            {
                **MINIMAL,
                "capacity_check": True,
                "engine": {"kind": "vllm-cpu", "pools_file": "benchmarks/pools/cpu-smoke.yaml"},
            }
        )


# ---- corpus ----------------------------------------------------------------------------


def test_corpus_master_data_has_one_vat_id_per_supplier_name() -> None:
    raw = [generate_invoice(7000 + i, max_line_items=4) for i in range(80)]
    names = {(i.supplier.name, i.supplier.vat_id) for i in raw}
    assert len(names) > len({n for n, _ in names}), "the plain generator repeats names"
    corpus = consistent_corpus(
        80, seed=7000, variants=(Variant.CLEAN,), max_line_items=4, anchor=None
    )
    assert len(corpus) == 80
    vat: dict[str, str] = {}
    for inv in corpus:
        assert vat.setdefault(inv.supplier.name, inv.supplier.vat_id) == inv.supplier.vat_id
    again = consistent_corpus(
        80, seed=7000, variants=(Variant.CLEAN,), max_line_items=4, anchor=None
    )
    assert [i.seed for i in again] == [i.seed for i in corpus]


def alnum(text: str) -> str:
    return "".join(c for c in text if c.isalnum())


def test_corpus_beyond_the_name_list_reuses_suppliers_consistently() -> None:
    # More invoices than the generator has supplier names: later invoices under a
    # name already drawn are issued by that supplier (one VAT id and IBAN per name),
    # and each invoice prints the identity its master data holds.
    corpus = consistent_corpus(
        2100, seed=7000, variants=(Variant.CLEAN,), max_line_items=2, anchor=None
    )
    assert len(corpus) == 2100
    by_name: dict[str, list[GeneratedInvoice]] = {}
    for inv in corpus:
        by_name.setdefault(inv.supplier.name, []).append(inv)
    assert len(by_name) < 2100 // 2, "suppliers repeat, as a tenant's do"
    for invoices in by_name.values():
        assert len({(i.supplier.vat_id, i.supplier.ibans) for i in invoices}) == 1
        for inv in invoices:
            assert inv.truth.iban is not None and inv.truth.supplier.vat_id is not None
            assert inv.truth.iban.value in inv.supplier.ibans
            assert alnum(inv.truth.supplier.vat_id.value) == alnum(inv.supplier.vat_id)
            assert inv.truth.iban.value in inv.ocr_text.replace(" ", "")
    numbers = [
        (i.supplier.vat_id, normalise_number(i.truth.invoice_number.value))
        for i in corpus
        if i.truth.invoice_number is not None
    ]
    assert len(set(numbers)) == len(corpus), "no supplier issues one number twice"


def test_adopted_supplier_must_be_of_the_drawn_country() -> None:
    first = generate_invoice(7000, max_line_items=2)
    other = next(
        generate_invoice(7001 + i, max_line_items=2)
        for i in range(200)
        if generate_invoice(7001 + i, max_line_items=2).identity.country != first.identity.country
    )
    with pytest.raises(ValueError, match="supplier of"):
        generate_invoice(other.seed, max_line_items=2, supplier=first.identity)


# ---- fake provider: same prompt, same service time ---------------------------------------


async def test_fake_latency_by_prompt_repeats_for_the_same_prompt() -> None:
    import httpx

    from benchmarks.fake_provider import FakeProvider, FaultPlan, Latency

    fake = FakeProvider()
    fake.set_faults(
        FaultPlan(latency=Latency(dist="uniform", a=0.0, b=0.3), seed=1, latency_by_prompt=True)
    )
    transport = httpx.ASGITransport(app=fake.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
        for prompt in ("alpha", "beta", "alpha", "beta"):
            body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
            r = await client.post("/v1/chat/completions", json=body)
            assert r.status_code == 200
    a1, b1, a2, b2 = (c.latency_s for c in fake.calls())
    assert a1 == pytest.approx(a2, abs=0.02)
    assert b1 == pytest.approx(b2, abs=0.02)
    assert abs(a1 - b1) > 0.04  # the two prompts drew different times (seeded: a fixed pair)


def test_every_scenario_pools_file_is_a_valid_pools_config() -> None:
    from benchmarks.scenario import ROOT
    from deployments.pools import load_pools

    checked = 0
    for name in known_scenarios():
        s = load_scenario(name)
        if s.engine.pools_file is not None:
            pools = load_pools(ROOT / s.engine.pools_file)
            assert pools.pools, name
            if s.engine.kind == "vllm-gpu":
                assert all(p.device == "gpu" and p.num_gpus <= 1 for p in pools.pools), name
            checked += 1
    assert checked >= 2  # gpu-h200, gpu-h100

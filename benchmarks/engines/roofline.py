"""Memory-bandwidth roofline for decode, and a run's output tokens/s against it.

In the decode phase every step reads all weights once (shared by the whole
batch) and each sequence's KV cache, and produces one token per sequence. When
memory bandwidth bounds the step:

    step_seconds >= (weight_bytes + batch * context * kv_bytes_per_token) / bandwidth
    tokens/s per sequence <= 1 / step_seconds
    tokens/s in total     <= batch / step_seconds

With ``kv_bytes_per_token = 0`` this is the familiar bandwidth / weight bytes
(an 8B bf16 model on an H200: 4.8e12 / 16.06e9 ≈ 299 tokens/s per sequence).
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.scenario import RooflineSpec


def weight_bytes(spec: RooflineSpec) -> float:
    return spec.params_billion * 1e9 * spec.bytes_per_param


def step_bytes(spec: RooflineSpec, batch: float = 1.0, context_tokens: float = 0.0) -> float:
    """Bytes one decode step reads: weights once, plus each sequence's KV cache."""
    return weight_bytes(spec) + batch * context_tokens * spec.kv_bytes_per_token


def roofline_tokens_per_s(
    spec: RooflineSpec, batch: float = 1.0, context_tokens: float = 0.0
) -> dict[str, float]:
    """Upper bounds on decode tokens/s per sequence and in total for ``batch`` sequences."""
    if batch <= 0:
        raise ValueError("batch must be positive")
    per_step = step_bytes(spec, batch, context_tokens)
    per_seq = spec.bandwidth_tb_s * 1e12 / per_step
    return {"per_sequence": per_seq, "total": per_seq * batch}


def roofline_report(spec: RooflineSpec, result: dict[str, Any]) -> dict[str, Any]:
    """The run's measured decode rate next to the roofline.

    Per sequence: 1 / mean TPOT (decode only). Total: output tokens over the
    run's elapsed time, against the bound at the mean batch the engine saw
    (output tokens x TPOT / elapsed, i.e. sequences decoding on average).
    Engine-core histograms (:mod:`benchmarks.engines.metrics`) are used when the
    result has them, since they also time answers cut at the output cap.
    Context per sequence is the mean prompt plus half the mean output.
    """
    eng = result["engine"]
    core = eng.get("engine_core") or {}
    # Engine-core figures cover every request (truncated ones too) where present.
    tpot_s = core.get("mean_tpot_ms", eng.get("mean_tpot_ms", math.nan)) / 1000
    elapsed = result["duration_s"]["elapsed"]
    out_tokens = core.get("generated_tokens", eng.get("total_output_tokens", 0))
    ok = max(1, eng.get("ok", 0))
    context = eng.get("total_input_tokens", 0) / ok + out_tokens / ok / 2
    batch = out_tokens * tpot_s / elapsed if elapsed and not math.isnan(tpot_s) else 1.0
    batch = max(batch, 1.0)
    bound = roofline_tokens_per_s(spec, batch, context)
    per_seq = 1 / tpot_s if tpot_s and not math.isnan(tpot_s) else math.nan
    total = out_tokens / elapsed if elapsed else math.nan
    return {
        "device": spec.device,
        "bandwidth_tb_s": spec.bandwidth_tb_s,
        "weight_bytes": weight_bytes(spec),
        "mean_batch": batch,
        "mean_context_tokens": context,
        "roofline_per_sequence_tok_s": bound["per_sequence"],
        "roofline_total_tok_s": bound["total"],
        "measured_per_sequence_tok_s": per_seq,
        "measured_total_tok_s": total,
        "fraction_of_roofline_per_sequence": per_seq / bound["per_sequence"],
        "fraction_of_roofline_total": total / bound["total"],
    }

"""The one-screen text summary of a run (headline ratios first)."""

from __future__ import annotations

from typing import Any


def _ms(value: float) -> str:
    return f"{value:.1f}"


def summary(result: dict[str, Any]) -> str:
    """The one-screen text summary of a run."""
    o, a, c = result["outcomes"], result["acceptance_latency_s"], result["completion_latency_s"]
    e = result["engine"]
    sc = result["scenario"]
    lines = [f"scenario {sc['name']} (engine {sc['engine']['kind']})"]
    head = result.get("baselines", {}).get("headline", {})
    if head:
        lines.append(
            "headline ratios: " + "  ".join(f"{label} {value:.2f}" for label, value in head.items())
        )
    lines += [
        f"requests  {result['requests']['scheduled']} scheduled, {o['admitted']} admitted, "
        f"rejected {result['requests']['rejected'] or 0}",
        f"outcomes  completed {o['completed']}  review {o['review_required']}  failed "
        f"{o['failed']}  pending {o['pending']}  (goodput {o['goodput_jobs']} in deadline)"
        f"  review reasons {result.get('review_reasons') or {}}",
        f"duration  arrivals {result['duration_s']['arrivals']:.1f}s  last settled "
        f"{result['duration_s']['last_settled']:.1f}s",
        f"request throughput {result['request_throughput']:.2f}/s  goodput "
        f"{result['goodput_per_s']:.2f} jobs/s  output {result['output_throughput']:.1f} tok/s",
        f"acceptance latency  p50 {a['p50'] * 1000:.1f} ms  p95 {a['p95'] * 1000:.1f} ms  "
        f"p99 {a['p99'] * 1000:.1f} ms",
        f"completion latency  p50 {c['p50']:.2f} s  p95 {c['p95']:.2f} s  p99 {c['p99']:.2f} s",
    ]
    d = result.get("delivery", {})
    if d.get("enabled"):
        q = d["accept_to_delivery_s"]
        lines.append(
            f"accept->ERP delivery p50 {q['p50']:.2f} s  p95 {q['p95']:.2f} s  p99 "
            f"{q['p99']:.2f} s  deliveries {d['states']}  ERP postings {d['erp_postings']}"
        )
    pl = result.get("plants")
    if pl:
        lines.append(
            f"plants  planted {pl['planted']}  decided as their rule {pl['as_rule']}  wrong "
            f"{pl['wrong_count']}  unplanted held {pl.get('unplanted_held_count', 0)}  "
            f"credit notes linked {pl['linked_credit_notes']}, posted as "
            f"credits {pl['erp_credit_postings']}  ERP applied twice {pl['erp_applied_twice']}"
            f"  held plants posted {pl['erp_planted_held_posted']}  settled "
            f"{result['settled_per_s']:.2f} jobs/s"
        )
    lines += [
        f"engine ({e['ttft_source']})  TTFT mean/median/p99 {_ms(e['mean_ttft_ms'])}/"
        f"{_ms(e['median_ttft_ms'])}/{_ms(e['p99_ttft_ms'])} ms  TPOT "
        f"{_ms(e['mean_tpot_ms'])}/{_ms(e['median_tpot_ms'])}/{_ms(e['p99_tpot_ms'])} ms  "
        f"ITL {_ms(e['mean_itl_ms'])}/{_ms(e['median_itl_ms'])}/{_ms(e['p99_itl_ms'])} ms",
    ]
    core = e.get("engine_core")
    if core:
        lines.append(
            f"engine core ({core['requests_timed']:.0f} requests, truncated included)  TTFT "
            f"mean/median/p99 {_ms(core['mean_ttft_ms'])}/{_ms(core['median_ttft_ms'])}/"
            f"{_ms(core['p99_ttft_ms'])} ms  TPOT {_ms(core['mean_tpot_ms'])} ms  ITL "
            f"{_ms(core['mean_itl_ms'])}/{_ms(core['median_itl_ms'])}/{_ms(core['p99_itl_ms'])} "
            f"ms  generated {core['generated_tokens']:.0f} tokens"
        )
    lines += [
        f"attempts/job {result['attempts_per_job']:.3f}  provider calls/job "
        f"{result['provider_calls_per_job']:.3f}  Jain fairness {result['jain_fairness']:.3f}",
        f"tokens prompt {result['tokens']['prompt']}  completion "
        f"{result['tokens']['completion']}  cost {result['cost']['total']} "
        f"{result['cost']['currency']}, per completed job {result['cost']['per_completed_job']}",
    ]
    for name, t in result["tenants"].items():
        q = t["completion_latency_s"]
        lines.append(
            f"  tenant {name:<10} w={t['weight']:g} admitted {t['admitted']} completed "
            f"{t['completed']}  p50 {q['p50']:.2f}s p95 {q['p95']:.2f}s p99 {q['p99']:.2f}s"
        )
    if "capacity" in result:
        cap = result["capacity"]
        lines.append(
            f"capacity model: predicted drain {cap['predicted_drain_s']:.1f}s "
            f"({cap['prediction']['bound_by']}-bound, {cap['prediction']['job_capacity']:.2f} "
            f"jobs/s), measured {cap['measured_drain_s']:.1f}s, error {cap['error'] * 100:+.1f}%"
        )
    if "roofline" in result:
        r = result["roofline"]
        lines.append(
            f"roofline ({r['device']}, {r['bandwidth_tb_s']} TB/s): per sequence measured "
            f"{r['measured_per_sequence_tok_s']:.1f} of {r['roofline_per_sequence_tok_s']:.1f} "
            f"tok/s; total {r['measured_total_tok_s']:.1f} of {r['roofline_total_tok_s']:.1f} "
            f"tok/s at mean batch {r['mean_batch']:.1f}"
        )
    for name, b in result.get("baselines", {}).items():
        if isinstance(b, dict) and "ratios" in b:
            lines.append(
                f"baseline {name}: "
                + "  ".join(f"{k} {v:.2f}" for k, v in b["ratios"].items())
                + f"  ({b['wall_s']:.0f} s)"
            )
    if "wall_s" in result:
        lines.append(
            f"wall time {result['wall_s']['total']:.0f} s (engine start {e.get('start_s', 0):.0f}"
            f" s, main run incl. start {result['wall_s']['main_incl_engine_start']:.0f} s)"
        )
    return "\n".join(lines)

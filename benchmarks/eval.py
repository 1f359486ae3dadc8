"""Accuracy evaluation: generated invoices through an engine, scored against ground truth.

Usage::

    python -m benchmarks.eval --engine vllm -n 20 --out results/eval      # bundled SmolLM2, CPU
    python -m benchmarks.eval --engine openai --base-url http://127.0.0.1:8000/v1 \\
        --model NAME -n 20 --out results/eval

Each invoice of :mod:`pipeline.invoices` is prompted with
:func:`pipeline.prompts.build_messages`, answered under structured output
(``response_format`` json_schema with :func:`pipeline.extraction.extraction_json_schema`),
parsed with :func:`pipeline.extraction.parse_extraction` and decided by
:func:`pipeline.validation.validate`, exactly as a job would be. The report
(``<out>/eval.json`` and ``<out>/eval.png``) holds:

* field-level precision and recall: per field, the extracted values are compared
  with the truth as multisets of normalised values (line items and tax lines
  pooled per field, so one skipped row costs one miss rather than shifting all);
* the decision confusion matrix: rows ``acceptable`` (every extracted value
  equals the truth and the document is clean, so SUCCEEDED is right) and
  ``unacceptable`` (anything else); columns SUCCEEDED, REVIEW_REQUIRED,
  MALFORMED (unparseable or schema-invalid) and ENGINE_ERROR. The cell that
  matters most is ``unacceptable`` x SUCCEEDED: a wrong result delivered;
* the expected-versus-actual decision matrix, reason-code counts, evidence
  resolution and latency.

The engine is one async function, :data:`ExtractFn`; :func:`openai_extract`
speaks OpenAI-compatible HTTP, and :func:`engine_extract` wraps any
:class:`pipeline.engines.Engine`. ``--engine vllm`` runs one pool of the pools
file (default: the one with the longest context) as
:class:`deployments.engine.PoolEngine` in this process: the same engine code,
sampling parameters and structured output a Serve replica uses, without Ray.
Numbers are reported as measured; nothing here is tuned to a model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmarks.partial_json import parse_prefix, salvage
from pipeline.engines import ChatMessage, Engine
from pipeline.errors import FencelineError, MalformedOutput
from pipeline.extraction import (
    EXTRACTION_SCHEMA_VERSION,
    Extraction,
    extraction_json_schema,
    parse_extraction,
)
from pipeline.invoices import GeneratedInvoice, Variant, generate_corpus
from pipeline.prompts import PROMPT_VERSION, build_messages, estimate_output_tokens
from pipeline.validation import (
    VALIDATION_POLICY_VERSION,
    Decision,
    ReasonCode,
    compact_id,
    evidenced_fields,
    normalise_name,
    normalise_text,
    validate,
)

#: ``(messages, json_schema, max_tokens) -> raw model output``.
ExtractFn = Callable[[list[dict[str, str]], dict[str, Any], int], Awaitable[str]]

OUTCOMES = ("SUCCEEDED", "REVIEW_REQUIRED", "MALFORMED", "ENGINE_ERROR")
SCALAR_FIELDS = (
    "supplier.name",
    "supplier.vat_id",
    "invoice_number",
    "issue_date",
    "due_date",
    "currency",
    "net_total",
    "tax_total",
    "gross_total",
    "iban",
)
ITEM_FIELDS = ("description", "quantity", "unit_price", "line_amount", "tax_rate")
TAX_FIELDS = ("rate", "base", "amount")
FIELDS = (
    *SCALAR_FIELDS,
    *(f"line_items[].{f}" for f in ITEM_FIELDS),
    *(f"tax_lines[].{f}" for f in TAX_FIELDS),
)
#: Variants a model can see: the document-level ones (plus clean documents).
DEFAULT_VARIANTS = (
    Variant.CLEAN,
    Variant.CLEAN,
    Variant.ARITHMETIC_OFF_BY_CENT,
    Variant.CLEAN,
    Variant.CURRENCY_MIX,
    Variant.CLEAN,
    Variant.HOMOGLYPH_SUPPLIER,
    Variant.CLEAN,
    Variant.BIDI_CONTROL,
    Variant.PROMPT_INJECTION,
)
_EVIDENCE_FAILURES = {ReasonCode.EVIDENCE_OUT_OF_RANGE, ReasonCode.EVIDENCE_QUOTE_MISMATCH}


def openai_extract(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    timeout: float = 600.0,
    client: httpx.AsyncClient | None = None,
) -> ExtractFn:
    """An :data:`ExtractFn` for an OpenAI-compatible ``/chat/completions`` endpoint.

    Greedy decoding (temperature 0) so a run is repeatable on engines that are.
    """
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def extract(
        messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int
    ) -> str:
        body = {
            "model": model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "invoice", "schema": schema, "strict": True},
            },
        }
        own = client is None
        http = client or httpx.AsyncClient(timeout=timeout)
        try:
            response = await http.post(url, json=body, headers=headers, timeout=timeout)
            response.raise_for_status()
            content = response.json()["choices"][0]["message"]["content"]
        finally:
            if own:
                await http.aclose()
        if not isinstance(content, str):
            raise MalformedOutput(f"message content is {type(content).__name__}, not text")
        return content

    return extract


def engine_extract(engine: Engine, *, timeout: float = 600.0) -> ExtractFn:
    """An :data:`ExtractFn` over a :class:`pipeline.engines.Engine` (its text output)."""

    async def extract(
        messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int
    ) -> str:
        chat = [ChatMessage(role=m["role"], content=m["content"]) for m in messages]
        completion = await engine.complete(
            chat, json_schema=schema, max_tokens=max_tokens, timeout=timeout
        )
        return completion.text

    return extract


# --- scoring -----------------------------------------------------------------------------------


def _norm_amount(value: Any) -> str:
    return format(value.normalize(), "f")


def field_values(extraction: Extraction) -> dict[str, Counter[str]]:
    """Normalised values per field; list fields pool all rows into one multiset."""
    e = extraction
    scalars: dict[str, str | None] = {
        "supplier.name": normalise_name(e.supplier.name.value) if e.supplier.name else None,
        "supplier.vat_id": compact_id(e.supplier.vat_id.value) if e.supplier.vat_id else None,
        "invoice_number": normalise_text(e.invoice_number.value) if e.invoice_number else None,
        "issue_date": e.issue_date.value.isoformat() if e.issue_date else None,
        "due_date": e.due_date.value.isoformat() if e.due_date else None,
        "currency": e.currency.value if e.currency else None,
        "net_total": _norm_amount(e.net_total.value) if e.net_total else None,
        "tax_total": _norm_amount(e.tax_total.value) if e.tax_total else None,
        "gross_total": _norm_amount(e.gross_total.value) if e.gross_total else None,
        "iban": e.iban.value if e.iban else None,
    }
    out = {name: Counter([v] if v is not None else []) for name, v in scalars.items()}
    for name in ITEM_FIELDS:
        out[f"line_items[].{name}"] = Counter(
            normalise_text(i.description).casefold()
            if name == "description"
            else _norm_amount(getattr(i, name))
            for i in e.line_items
        )
    for name in TAX_FIELDS:
        out[f"tax_lines[].{name}"] = Counter(_norm_amount(getattr(t, name)) for t in e.tax_lines)
    return out


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def _counts(tp: int, fp: int, fn: int) -> dict[str, Any]:
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
    }


async def evaluate_one(
    invoice: GeneratedInvoice,
    extract: ExtractFn,
    *,
    max_tokens: int | None = None,
    include_schema: bool = True,
) -> dict[str, Any]:
    """Run one invoice through the engine and the validation policy; never raises.

    ``max_tokens`` caps the output reservation (a small model's context window may
    not hold the full estimate); ``include_schema`` also prints the schema in the prompt.
    """
    messages = build_messages(invoice.ocr_text, include_schema=include_schema)
    budget = estimate_output_tokens(invoice.ocr_text)
    if max_tokens is not None:
        budget = min(budget, max_tokens)
    schema = extraction_json_schema()
    started = time.perf_counter()
    row: dict[str, Any] = {
        "seed": invoice.seed,
        "variant": invoice.variant.value,
        "language": invoice.language,
        "layout": invoice.layout,
        "currency": invoice.currency,
        "line_items": len(invoice.truth.line_items),
        "truth_decision": invoice.truth_decision.value,
        "reasons": [],
        "error": None,
    }
    truth = field_values(invoice.truth)
    predicted: dict[str, Counter[str]] = {name: Counter() for name in FIELDS}
    before_cap: dict[str, Counter[str]] | None = None
    text: str | None = None
    try:
        text = await extract(messages, schema, budget)
        extraction = parse_extraction(text)
    except MalformedOutput as exc:
        row.update(outcome="MALFORMED", error=str(exc)[:300])
        partial = exc.text if exc.text is not None else text
        salvaged = salvage(Extraction, parse_prefix(partial)) if partial else None
        before_cap = field_values(salvaged) if salvaged is not None else None
    except FencelineError as exc:  # timeouts, context too long, engine down
        row.update(outcome="ENGINE_ERROR", error=f"{type(exc).__name__}: {exc}"[:300])
    except (httpx.HTTPError, KeyError, IndexError, ValueError, TypeError) as exc:
        row.update(outcome="ENGINE_ERROR", error=f"{type(exc).__name__}: {exc}"[:300])
    else:
        report = validate(extraction, invoice.ocr_text, invoice.master_data, today=invoice.today)
        predicted = field_values(extraction)
        row.update(
            outcome=report.decision.value,
            reasons=[r.code.value for r in report.reasons],
            evidence_refs=sum(1 for _ in evidenced_fields(extraction)),
        )
    row["latency_s"] = round(time.perf_counter() - started, 4)
    row["fields"] = {
        name: [
            sum((predicted[name] & truth[name]).values()),
            sum(predicted[name].values()),
            sum(truth[name].values()),
        ]
        for name in FIELDS
    }
    # What a cut-off answer had already written, scored the same way (never a decision).
    scored = before_cap if before_cap is not None else predicted
    row["fields_before_cap"] = {
        name: [
            sum((scored[name] & truth[name]).values()),
            sum(scored[name].values()),
            sum(truth[name].values()),
        ]
        for name in FIELDS
    }
    row["exact_match"] = row["outcome"] in ("SUCCEEDED", "REVIEW_REQUIRED") and predicted == truth
    row["acceptable"] = row["exact_match"] and invoice.truth_decision is Decision.SUCCEEDED
    return row


def summarise(rows: Sequence[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """Aggregate per-invoice rows into the report (pure; the tests check it directly)."""
    fields: dict[str, dict[str, Any]] = {}
    totals = [0, 0, 0]
    for name in FIELDS:
        tp = sum(r["fields"][name][0] for r in rows)
        pred = sum(r["fields"][name][1] for r in rows)
        true = sum(r["fields"][name][2] for r in rows)
        fields[name] = _counts(tp, pred - tp, true - tp)
        totals = [totals[0] + tp, totals[1] + pred - tp, totals[2] + true - tp]
    partial = [0, 0, 0]
    fields_before_cap: dict[str, dict[str, Any]] = {}
    for name in FIELDS:
        tp = sum(r.get("fields_before_cap", r["fields"])[name][0] for r in rows)
        pred = sum(r.get("fields_before_cap", r["fields"])[name][1] for r in rows)
        true = sum(r.get("fields_before_cap", r["fields"])[name][2] for r in rows)
        fields_before_cap[name] = _counts(tp, pred - tp, true - tp)
        partial = [partial[0] + tp, partial[1] + pred - tp, partial[2] + true - tp]
    confusion = {row: dict.fromkeys(OUTCOMES, 0) for row in ("acceptable", "unacceptable")}
    expected = {d.value: dict.fromkeys(OUTCOMES, 0) for d in Decision}
    for r in rows:
        confusion["acceptable" if r["acceptable"] else "unacceptable"][r["outcome"]] += 1
        expected[r["truth_decision"]][r["outcome"]] += 1
    n = len(rows)
    # Only a decision can be right: MALFORMED and ENGINE_ERROR count against accuracy.
    right = confusion["acceptable"]["SUCCEEDED"] + confusion["unacceptable"]["REVIEW_REQUIRED"]
    evidence_refs = sum(r.get("evidence_refs", 0) for r in rows)
    evidence_bad = sum(
        1 for r in rows for code in r["reasons"] if code in {c.value for c in _EVIDENCE_FAILURES}
    )
    latencies = sorted(r["latency_s"] for r in rows)
    return {
        **meta,
        "n": n,
        "schema_version": EXTRACTION_SCHEMA_VERSION,
        "policy_version": VALIDATION_POLICY_VERSION,
        "prompt_version": PROMPT_VERSION,
        "fields": fields,
        "micro": _counts(*totals),
        # Also counting what truncated answers had written before the output cap.
        "micro_before_cap": _counts(*partial),
        "fields_before_cap": fields_before_cap,
        "confusion": confusion,
        "decision_vs_expected": expected,
        "rates": {
            "decision_accuracy": _ratio(right, n),
            "false_accept": _ratio(confusion["unacceptable"]["SUCCEEDED"], n),
            "false_review": _ratio(confusion["acceptable"]["REVIEW_REQUIRED"], n),
            "exact_match": _ratio(sum(1 for r in rows if r["exact_match"]), n),
            "malformed": _ratio(sum(1 for r in rows if r["outcome"] == "MALFORMED"), n),
            "engine_error": _ratio(sum(1 for r in rows if r["outcome"] == "ENGINE_ERROR"), n),
            "evidence_resolved": _ratio(evidence_refs - evidence_bad, evidence_refs),
        },
        "reason_counts": dict(Counter(code for r in rows for code in r["reasons"]).most_common()),
        "latency_s": {
            "mean": round(statistics.fmean(latencies), 4) if latencies else None,
            "p50": latencies[len(latencies) // 2] if latencies else None,
            "p95": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
            if latencies
            else None,
            "max": latencies[-1] if latencies else None,
        },
        "invoices": list(rows),
    }


def plot(report: dict[str, Any], path: Path) -> None:
    """Per-field precision/recall bars and the decision confusion matrix, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["fields"])
    precision = [report["fields"][f]["precision"] or 0.0 for f in names]
    recall = [report["fields"][f]["recall"] or 0.0 for f in names]
    fig, (bars, matrix) = plt.subplots(
        1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [3, 1.3]}
    )
    xs = range(len(names))
    bars.bar([x - 0.2 for x in xs], precision, width=0.4, label="precision")
    bars.bar([x + 0.2 for x in xs], recall, width=0.4, label="recall")
    bars.set_xticks(list(xs), names, rotation=60, ha="right", fontsize=8)
    bars.set_ylim(0, 1.05)
    micro = report["micro"]
    scores = f"micro P={micro['precision']} R={micro['recall']}"
    bars.set_title(f"{report.get('model')} · n={report['n']} · {scores}")
    bars.legend(loc="lower right")
    rows = ["acceptable", "unacceptable"]
    cells = [[report["confusion"][r][c] for c in OUTCOMES] for r in rows]
    matrix.imshow(cells, cmap="Blues")
    matrix.set_xticks(range(len(OUTCOMES)), [c.replace("_", "\n") for c in OUTCOMES], fontsize=8)
    matrix.set_yticks(range(len(rows)), rows)
    for i, row in enumerate(cells):
        for j, value in enumerate(row):
            matrix.text(j, i, str(value), ha="center", va="center", color="black")
    matrix.set_title(f"decision (false accept {report['rates']['false_accept']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


async def run_eval(
    extract: ExtractFn,
    *,
    n: int,
    seed: int = 0,
    variants: Sequence[Variant] = DEFAULT_VARIANTS,
    max_line_items: int = 200,
    concurrency: int = 1,
    max_tokens: int | None = None,
    include_schema: bool = True,
    out: Path,
    meta: dict[str, Any] | None = None,
    progress: bool = False,
) -> tuple[dict[str, Any], Path, Path]:
    """Evaluate ``n`` invoices; write ``eval.json`` and ``eval.png`` under ``out``.

    ``progress`` prints one line per finished invoice (the CLI turns it on).
    """
    corpus = generate_corpus(n, seed=seed, variants=tuple(variants), max_line_items=max_line_items)
    gate = asyncio.Semaphore(max(1, concurrency))

    done = 0
    started = time.perf_counter()

    async def one(invoice: GeneratedInvoice) -> dict[str, Any]:
        nonlocal done
        async with gate:
            row = await evaluate_one(
                invoice, extract, max_tokens=max_tokens, include_schema=include_schema
            )
        done += 1
        if progress:
            print(
                f"eval: {done}/{len(corpus)} seed {invoice.seed} {invoice.variant.value}: "
                f"{row['outcome']} in {row['latency_s']:.1f} s "
                f"({time.perf_counter() - started:.0f} s elapsed)",
                flush=True,
            )
        return row

    rows = await asyncio.gather(*(one(inv) for inv in corpus))
    info = {
        "seed": seed,
        "variants": [v.value for v in variants],
        "max_line_items": max_line_items,
        "max_tokens": max_tokens,
        "schema_in_prompt": include_schema,
    }
    report = summarise(rows, {**(meta or {}), **info})
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / "eval.json", out / "eval.png"
    json_path.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    plot(report, png_path)
    return report, json_path, png_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.eval", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--engine", choices=["openai", "vllm"], default="openai")
    parser.add_argument("--base-url", help="openai: e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", help="openai: the model name")
    parser.add_argument("--pools", default=None, help="vllm: pools file (deployments/pools.yaml)")
    parser.add_argument("--pool", default=None, help="vllm: pool name (default: longest context)")
    parser.add_argument(
        "--compile", action="store_true", help="vllm: torch.compile (slower start, faster decode)"
    )
    parser.add_argument("--api-key", default=None)
    parser.add_argument("-n", type=int, default=20, help="number of invoices")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--variants",
        default=",".join(v.value for v in DEFAULT_VARIANTS),
        help="comma-separated cycle of variants (see pipeline.invoices.Variant)",
    )
    parser.add_argument("--max-line-items", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="cap on the output estimate per request"
    )
    parser.add_argument(
        "--no-schema-in-prompt",
        action="store_true",
        help="rely on structured output alone (shorter prompt for small context windows)",
    )
    parser.add_argument(
        "--out", default="results/eval", help="directory for eval.json and eval.png"
    )
    args = parser.parse_args(argv)
    if args.engine == "openai" and not (args.base_url and args.model):
        parser.error("--engine openai needs --base-url and --model")
    variants = tuple(Variant(v.strip()) for v in args.variants.split(",") if v.strip())
    report, json_path, png_path = asyncio.run(_run(args, variants))
    print(
        json.dumps(
            {"micro": report["micro"], "rates": report["rates"], "confusion": report["confusion"]},
            indent=1,
        )
    )
    print(f"wrote {json_path} and {png_path}")
    return 0


async def _run(
    args: argparse.Namespace, variants: tuple[Variant, ...]
) -> tuple[dict[str, Any], Path, Path]:
    meta: dict[str, Any] = {"engine": args.engine}
    stop: Callable[[], None] = lambda: None  # noqa: E731
    if args.engine == "vllm":
        from deployments.engine import PoolEngine
        from deployments.pools import load_pools

        pools = load_pools(args.pools)
        if not args.compile:
            pools = pools.eager()
        pool = pools.pool(args.pool) if args.pool else pools.pools[-1]
        started = time.perf_counter()
        engine = PoolEngine(pool)
        print(
            f"vllm: pool {pool.name} ({pool.model_name()}) ready in "
            f"{time.perf_counter() - started:.1f} s"
        )
        stop = engine.stop
        extract = engine_extract(engine, timeout=args.timeout)
        meta.update(
            model=pool.model_name(),
            pool=pool.name,
            max_model_len=pool.max_model_len,
            enforce_eager=pool.enforce_eager,
        )
    else:
        extract = openai_extract(
            args.base_url, args.model, api_key=args.api_key, timeout=args.timeout
        )
        meta.update(model=args.model, base_url=args.base_url)
    try:
        return await run_eval(
            extract,
            n=args.n,
            seed=args.seed,
            variants=variants,
            max_line_items=args.max_line_items,
            concurrency=args.concurrency,
            max_tokens=args.max_tokens,
            include_schema=not args.no_schema_in_prompt,
            out=Path(args.out),
            meta=meta,
            progress=True,
        )
    finally:
        stop()


if __name__ == "__main__":
    raise SystemExit(main())

"""Train the pools' LoRA adapter on generated invoices (``make adapter``).

Also ``fenceline adapter train``, with the same options.

A peft LoRA adapter on the converted SmolLM2 (:func:`deployments.model_prepare.default_model_dir`),
trained in float32 on this machine's CPU, learns to write the answer the extraction
contract asks for. The contract is reached through two functions only, so a new
contract needs a retraining, not a code change here:

* the prompt is ``pipeline.extraction.prepare_call(ocr_text).messages`` rendered with
  the model's chat template and the generation prompt (:func:`deployments.engine.render_prompt`,
  the rendering the router and the engine use at serving time);
* the target is ``pipeline.extraction.answer_for(truth, ocr_text)`` followed by EOS.

The loss is on the answer tokens only: prompt tokens are labelled ``-100``.

**Seeds.** Training invoice ``i`` is ``generate_invoice(TRAINING_SEED_START + i, ...)``
with ``TRAINING_SEED_START = 1_000_000`` (``--first-seed`` moves the start within the
training range, so a continued training draws invoices the first one never saw).
Tests, ``fenceline eval``, the demo and the benchmark scenarios use seeds far below
that (``tests/unit/test_adapter_train.py`` checks their defaults), so an evaluation
never scores an invoice the adapter saw.

**Layouts nobody here wrote.** ``--fuzz-share`` of the invoices are printed by the
layout fuzzer (:mod:`benchmarks.fuzz`: one transformation, sometimes two compatible
ones, drawn per seed) instead of the generator; the target is the same
``answer_for(truth, text)`` of the fuzzer's truth. ``--exclude-transform`` keeps
transformations out of training, so an evaluation on them measures layouts the
adapter never saw (leave-group-out). ``--init-adapter`` continues training an
existing adapter instead of starting from a fresh one.

**Determinism.** ``torch``, ``random`` and the example order are seeded (``--seed``);
the same command on the same versions gives the same adapter up to float rounding
in multi-threaded kernels.

**Cost** (measured 2026-12-01, 2 threads, quiet 2-core machine, 8 examples of 1,626
tokens): one example per optimizer step ~12.4 s per example (131 tokens/s); padded
batches of 4 ~19.1 s per example (85 tokens/s: padding and worse cache use), so the
default is ``--batch-size 1``. Expect roughly 7-12 s per example at 850-1,500 tokens.

Beside the adapter (``adapter_config.json``, ``adapter_model.safetensors``) the run
writes ``manifest.json`` (the data and the environment it came from) and ``RECIPE.md``
(the exact command, hyperparameters and time measured).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import random
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.invoices.generator import LANGUAGES as GENERATOR_LANGUAGES
from benchmarks.invoices.generator import LAYOUTS as GENERATOR_LAYOUTS
from benchmarks.invoices.variants import Variant

#: The first training seed; training uses ``TRAINING_SEED_START .. +N-1``.
TRAINING_SEED_START = 1_000_000
#: Seeds from here on are not training data (caps ``--examples`` at a million).
TRAINING_SEED_END = 2_000_000
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "deployments" / "adapters" / "smollm2-invoices"
#: Every linear layer of the Llama blocks (vLLM's CPU LoRA serves all of them).
TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
#: The generator's invoice families, which ``--exclude-*`` choose from.
LANGUAGES: tuple[str, ...] = tuple(GENERATOR_LANGUAGES)
LAYOUTS: tuple[str, ...] = tuple(GENERATOR_LAYOUTS)
IGNORE = -100
#: The variants a training invoice may carry: those printed in the document (a model
#: sees them), in catalogue order.
DOCUMENT_VARIANTS: tuple[Variant, ...] = tuple(v for v in Variant if v.in_document)


@dataclass(frozen=True)
class Example:
    """One tokenized training invoice."""

    seed: int
    input_ids: list[int]
    labels: list[int]
    language: str
    layout: str
    line_items: int
    variant: str = "clean"
    #: The layout fuzzer's transformations this invoice was printed under ("" for the
    #: generator's own print).
    fuzz_family: str = ""

    @property
    def prompt_tokens(self) -> int:
        return sum(1 for label in self.labels if label == IGNORE)


def tokenize_example(
    tokenizer: Any, messages: Sequence[Any], answer: str
) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)``: prompt then answer + EOS; the prompt is labelled ``-100``.

    The answer is encoded on its own (the model generates it after the prompt, token
    by token, from a fresh boundary) and ends with the tokenizer's EOS, so the adapter
    learns to stop.
    """
    from deployments.engine import render_prompt

    prompt = render_prompt(tokenizer, messages)
    answer_ids = [int(i) for i in tokenizer.encode(answer, add_special_tokens=False)]
    answer_ids.append(int(tokenizer.eos_token_id))
    return prompt + answer_ids, [IGNORE] * len(prompt) + answer_ids


def family_filter(
    exclude_languages: Sequence[str],
    exclude_layouts: Sequence[str],
    generate: Callable[..., Any] | None = None,
) -> dict[str, tuple[str, ...]]:
    """Keyword arguments restricting the generator to the families not excluded.

    Raises:
        ValueError: an unknown family, every family excluded, or a generator without
            the ``languages=`` / ``layouts=`` keyword this needs.
    """
    if generate is None:
        from benchmarks.invoices.generator import generate_invoice

        generate = generate_invoice
    accepted = inspect.signature(generate).parameters
    kwargs: dict[str, tuple[str, ...]] = {}
    for keyword, known, excluded in (
        ("languages", LANGUAGES, exclude_languages),
        ("layouts", LAYOUTS, exclude_layouts),
    ):
        if not excluded:
            continue
        unknown = sorted(set(excluded) - set(known))
        if unknown:
            raise ValueError(f"unknown {keyword}: {unknown} (known: {list(known)})")
        if keyword not in accepted:
            raise ValueError(
                f"--exclude-{keyword[:-1]} needs benchmarks.invoices.generate_invoice to accept "
                f"{keyword}=..., and this version does not; train without the exclusion or "
                "update the generator"
            )
        kept = tuple(k for k in known if k not in excluded)
        if not kept:
            raise ValueError(f"every {keyword[:-1]} is excluded")
        kwargs[keyword] = kept
    return kwargs


def variant_for(seed: int, share: float) -> Variant:
    """The variant of training invoice ``seed``: with probability ``share`` one of the
    document-level variants (:data:`DOCUMENT_VARIANTS`, drawn evenly), else clean.

    Deterministic in the seed, from its own stream (the generator's draws are not
    touched). The target stays the faithful transcription of what is printed: for a
    prompt injection the supplier's real IBAN, never the attacker's; for an invoice
    a cent off, the printed amounts, which validation then refuses.
    """
    rng = random.Random(f"adapter-variant:{seed}")
    if rng.random() >= share:
        return Variant.CLEAN
    return rng.choice(DOCUMENT_VARIANTS)


def fuzz_family_for(
    seed: int, share: float, excluded: Sequence[str] = ()
) -> tuple[str, ...] | None:
    """The fuzzer's family for training invoice ``seed``, or None for the generator's print.

    With probability ``share`` one transformation not in ``excluded``, drawn evenly, and
    with probability one half a second compatible one. Deterministic in the seed, from
    its own stream.

    Raises:
        ValueError: an unknown transformation, or every one excluded.
    """
    from benchmarks.fuzz.transforms import BY_NAME, compatible

    unknown = sorted(set(excluded) - set(BY_NAME))
    if unknown:
        raise ValueError(f"unknown transformations: {unknown} (known: {sorted(BY_NAME)})")
    pool = [name for name in BY_NAME if name not in set(excluded)]
    if not pool:
        raise ValueError("every transformation is excluded")
    rng = random.Random(f"adapter-fuzz:{seed}")
    if rng.random() >= share:
        return None
    family = [rng.choice(pool)]
    if rng.random() < 0.5:
        second = [n for n in pool if n != family[0] and compatible([family[0], n])]
        if second:
            family.append(rng.choice(second))
    return tuple(sorted(family, key=list(BY_NAME).index))


def build_examples(
    tokenizer: Any,
    n: int,
    *,
    max_line_items: int,
    max_seq_len: int,
    families: dict[str, tuple[str, ...]],
    first_seed: int = TRAINING_SEED_START,
    variant_share: float = 0.0,
    fuzz_share: float = 0.0,
    exclude_transforms: Sequence[str] = (),
) -> tuple[list[Example], list[int]]:
    """``n`` examples from consecutive seeds, and the seeds skipped as too long.

    A prompt is never truncated (the model would learn to answer from half an
    invoice); an example longer than ``max_seq_len`` is skipped, counted, and the
    next seed is drawn instead. ``variant_share`` of the invoices carry a
    document-level variant (:func:`variant_for`); ``fuzz_share`` are printed by the
    layout fuzzer instead (:func:`fuzz_family_for`), clean.
    """
    from benchmarks.fuzz.cases import fuzz_case
    from benchmarks.invoices.generator import generate_invoice
    from pipeline.extraction import answer_for, prepare_call

    examples: list[Example] = []
    skipped: list[int] = []
    seed = first_seed
    while len(examples) < n:
        if seed >= TRAINING_SEED_END:
            raise ValueError(f"training seeds exhausted at {TRAINING_SEED_END}")
        fuzz = fuzz_family_for(seed, fuzz_share, exclude_transforms)
        if fuzz is not None:
            case = fuzz_case(seed, fuzz, max_line_items=max_line_items)
            text, truth, language, layout = case.text, case.truth, case.language, "fuzzed"
            variant = Variant.CLEAN
        else:
            # families: languages=/layouts= only when the generator takes them (family_filter).
            variant = variant_for(seed, variant_share)
            inv = generate_invoice(seed, variant, max_line_items=max_line_items, **families)  # type: ignore[arg-type]
            text, truth, language, layout = inv.ocr_text, inv.truth, inv.language, inv.layout
        call = prepare_call(text)
        ids, labels = tokenize_example(tokenizer, call.messages, answer_for(truth, text))
        if len(ids) > max_seq_len:
            skipped.append(seed)
        else:
            examples.append(
                Example(
                    seed,
                    ids,
                    labels,
                    language,
                    layout,
                    len(truth.line_items),
                    variant.value,
                    "+".join(fuzz or ()),
                )
            )
        seed += 1
    return examples, skipped


def collate(batch: Sequence[Example], pad_id: int) -> dict[str, Any]:
    """Right-padded tensors; padding is masked out of attention and loss."""
    import torch

    width = max(len(e.input_ids) for e in batch)
    ids = [e.input_ids + [pad_id] * (width - len(e.input_ids)) for e in batch]
    labels = [e.labels + [IGNORE] * (width - len(e.labels)) for e in batch]
    mask = [[1] * len(e.input_ids) + [0] * (width - len(e.input_ids)) for e in batch]
    return {
        "input_ids": torch.tensor(ids),
        "labels": torch.tensor(labels),
        "attention_mask": torch.tensor(mask),
    }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _adapter_identity(folder: Path | None) -> dict[str, str] | None:
    """The adapter a training continued from: its folder and weights' digest."""
    if folder is None:
        return None
    weights = Path(folder) / "adapter_model.safetensors"
    return {"path": str(folder), "sha256": _sha256(weights) if weights.is_file() else "absent"}


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{head}-dirty" if dirty else head


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "peft"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def train(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """Build the examples, train, save the adapter, manifest and recipe; returns the manifest."""
    # Nothing is fetched: without this, peft looks the base model up on the Hub when it saves.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from deployments.model_prepare import MODEL_DIR_NAME, default_model_dir
    from pipeline.extraction import prompt_version

    families = family_filter(args.exclude_language, args.exclude_layout)
    model_dir = Path(args.model) if args.model else default_model_dir()
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"no model at {model_dir}: run `make model` first")
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    examples, skipped = build_examples(
        tokenizer,
        args.examples,
        max_line_items=args.max_line_items,
        max_seq_len=args.max_seq_len,
        families=families,
        first_seed=args.first_seed,
        variant_share=args.variant_share,
        fuzz_share=args.fuzz_share,
        exclude_transforms=args.exclude_transform,
    )
    build_s = time.perf_counter() - started
    print(
        f"adapter: {len(examples)} examples from seeds {args.first_seed}.."
        f"{max(e.seed for e in examples)} ({len(skipped)} skipped > {args.max_seq_len} tokens), "
        f"{sum(len(e.input_ids) for e in examples) / len(examples):.0f} tokens/example mean, "
        f"built in {build_s:.1f} s",
        flush=True,
    )
    base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    lora = LoraConfig(
        r=args.rank,
        lora_alpha=args.alpha,
        lora_dropout=0.0,
        target_modules=list(TARGET_MODULES),
        task_type="CAUSAL_LM",
    )
    if args.init_adapter:
        # Continue an existing adapter: its own rank and alpha, not --rank/--alpha.
        model = PeftModel.from_pretrained(base, str(args.init_adapter), is_trainable=True)
        init_cfg: Any = model.peft_config["default"]  # a LoraConfig
        args.rank, args.alpha = int(init_cfg.r), float(init_cfg.lora_alpha)
    else:
        model = get_peft_model(base, lora)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    order = random.Random(args.seed)
    batches: list[list[Example]] = []
    for _ in range(args.epochs):
        epoch = list(examples)
        order.shuffle(epoch)
        batches += [epoch[i : i + args.batch_size] for i in range(0, len(epoch), args.batch_size)]
    pad_id = int(
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    budget_s = args.time_budget_minutes * 60 if args.time_budget_minutes else None
    train_started = time.perf_counter()
    # CPU time of all threads: against wall time it shows how contended the machine was.
    cpu_started = time.process_time()
    losses: list[float] = []
    tokens = 0
    stopped_early = False
    for step, batch in enumerate(batches, start=1):
        if budget_s is not None and time.perf_counter() - started > budget_s:
            stopped_early = True
            print(
                f"adapter: time budget of {args.time_budget_minutes} min reached, saving",
                flush=True,
            )
            break
        loss = model(**collate(batch, pad_id)).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.item()))
        tokens += sum(len(e.input_ids) for e in batch)
        if step % args.log_every == 0 or step == len(batches):
            elapsed = time.perf_counter() - train_started
            recent = losses[-args.log_every :]
            eta = elapsed / step * (len(batches) - step)
            print(
                f"step {step}/{len(batches)} loss {sum(recent) / len(recent):.4f} "
                f"{tokens / elapsed:.0f} tok/s elapsed {elapsed:.0f} s eta {eta:.0f} s "
                f"(cpu {time.process_time() - cpu_started:.0f} s)",
                flush=True,
            )
    train_s = time.perf_counter() - train_started
    cpu_s = time.process_time() - cpu_started
    steps = len(losses)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # The base model's name, not this machine's cache path, goes into adapter_config.json.
    model.peft_config["default"].base_model_name_or_path = MODEL_DIR_NAME
    model.save_pretrained(str(out))
    (out / "README.md").unlink(missing_ok=True)  # peft's empty model card; RECIPE.md is ours
    seen = {e.seed for batch in batches[:steps] for e in batch}
    used = [e for e in examples if e.seed in seen]
    manifest = {
        "base_model": {
            "name": MODEL_DIR_NAME,
            "sha256": {
                p.name: _sha256(p)
                for p in sorted(model_dir.iterdir())
                if p.name == "config.json" or p.suffix == ".safetensors"
            },
        },
        "seeds": {
            "first": args.first_seed,
            "last_drawn": max(e.seed for e in examples),
            "skipped_too_long": skipped,
            "note": "training seeds start at 1_000_000; tests, eval and demo use lower ones",
        },
        "examples": len(examples),
        "examples_trained": len(used),
        "prompt_version": prompt_version(),
        "max_line_items": args.max_line_items,
        "max_seq_len": args.max_seq_len,
        "excluded": {"languages": args.exclude_language, "layouts": args.exclude_layout},
        "variant_share": args.variant_share,
        "fuzz_share": args.fuzz_share,
        "excluded_transforms": sorted(args.exclude_transform),
        "init_adapter": _adapter_identity(args.init_adapter),
        "counts": {
            "language": dict(sorted(Counter(e.language for e in used).items())),
            "layout": dict(sorted(Counter(e.layout for e in used).items())),
            "variant": dict(sorted(Counter(e.variant for e in used).items())),
            "fuzz_family": dict(
                sorted(Counter(e.fuzz_family for e in used if e.fuzz_family).items())
            ),
            "line_items": {
                str(k): v for k, v in sorted(Counter(e.line_items for e in used).items())
            },
        },
        "tokens": {
            "prompt_mean": sum(e.prompt_tokens for e in examples) / len(examples),
            "answer_mean": sum(len(e.input_ids) - e.prompt_tokens for e in examples)
            / len(examples),
            "trained": tokens,
        },
        "hyperparameters": {
            "rank": args.rank,
            "alpha": args.alpha,
            "dropout": 0.0,
            "target_modules": list(TARGET_MODULES),
            "lr": args.lr,
            "optimizer": "AdamW, constant lr, no weight decay",
            "epochs": args.epochs,
            "batch_size": args.batch_size,
            "seed": args.seed,
            "threads": args.threads,
            "dtype": "float32",
        },
        "steps": steps,
        "steps_planned": len(batches),
        "stopped_early": stopped_early,
        "final_loss": sum(losses[-args.log_every :]) / max(1, len(losses[-args.log_every :])),
        "train_seconds": round(train_s, 1),
        "train_cpu_seconds": round(cpu_s, 1),
        "seconds_per_example": round(train_s / max(1, sum(len(b) for b in batches[:steps])), 2),
        "total_seconds": round(time.perf_counter() - started, 1),
        "versions": _versions(),
        "git_commit": _git_commit(),
        "command": command,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "RECIPE.md").write_text(recipe(manifest))
    print(f"adapter: wrote {out} ({steps} steps, {train_s:.0f} s training)", flush=True)
    return manifest


def recipe(manifest: dict[str, Any]) -> str:
    """``RECIPE.md``: how this adapter was made, for whoever retrains it."""
    h = manifest["hyperparameters"]
    rows = "\n".join(f"| {k} | {v} |" for k, v in h.items())
    early = " (stopped by the time budget)" if manifest["stopped_early"] else ""
    versions = ", ".join(f"{k} {v}" for k, v in manifest["versions"].items())
    return f"""# LoRA adapter for {manifest["base_model"]["name"]}

Trained by `benchmarks/adapter_train.py` on generated invoices (seeds from
{manifest["seeds"]["first"]:,} upward, disjoint from every seed tests, eval and the demo use).
Prompt: `pipeline.extraction.prepare_call(ocr_text).messages` under the model's chat template \
({manifest.get("prompt_version", "version not recorded")});
target: `pipeline.extraction.answer_for(truth, ocr_text)` + EOS; loss on the answer only.

## Command

```
{manifest["command"]}
```

Commit: `{manifest["git_commit"]}`; versions: {versions}.

## Hyperparameters

| parameter | value |
|---|---|
{rows}

## Data

{manifest["examples_trained"]} examples trained (of {manifest["examples"]} built; \
{len(manifest["seeds"]["skipped_too_long"])} seeds skipped as longer than \
{manifest["max_seq_len"]} tokens), max_line_items {manifest["max_line_items"]}, \
excluded {manifest["excluded"]}, share with a printed variant \
{manifest.get("variant_share", 0.0)} (counts by variant in `manifest.json`); share printed by \
the layout fuzzer {manifest.get("fuzz_share", 0.0)}, transformations kept out of training \
{manifest.get("excluded_transforms", [])}; continued from \
{(manifest.get("init_adapter") or {}).get("sha256", "nothing (a fresh adapter)")}. \
Mean prompt {manifest["tokens"]["prompt_mean"]:.0f} tokens, \
mean answer {manifest["tokens"]["answer_mean"]:.0f} tokens. Counts: see `manifest.json`.

## Time measured

{manifest["steps"]} of {manifest["steps_planned"]} steps{early} in {manifest["train_seconds"]} s \
of training ({manifest["seconds_per_example"]} s per example, {manifest["total_seconds"]} s in all;
{manifest["train_cpu_seconds"]} s of CPU time over {h["threads"]} threads while training);
final running loss {manifest["final_loss"]:.4f}.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The training options (shared by ``python -m`` and ``fenceline adapter train``)."""
    p.add_argument("--examples", type=int, default=1000, help="training invoices (default 1000)")
    p.add_argument("--max-line-items", type=int, default=8, help="cap on drawn line items")
    p.add_argument("--rank", type=int, default=16, help="LoRA rank r (the pools' max_rank >= r)")
    p.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha")
    p.add_argument("--lr", type=float, default=2e-4, help="AdamW learning rate")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument(
        "--batch-size", type=int, default=1, help="examples per step (1 is fastest on CPU)"
    )
    p.add_argument(
        "--max-seq-len", type=int, default=2048, help="skip (never truncate) longer examples"
    )
    p.add_argument(
        "--variant-share",
        type=float,
        default=0.0,
        help="share of invoices with a printed adversarial variant (prompt injection, "
        "homoglyph, ...), the target their faithful transcription (default 0)",
    )
    p.add_argument(
        "--fuzz-share",
        type=float,
        default=0.0,
        help="share of invoices printed by the layout fuzzer (benchmarks.fuzz) instead of "
        "the generator (default 0)",
    )
    p.add_argument(
        "--exclude-transform",
        action="append",
        default=[],
        metavar="NAME",
        help="a fuzzer transformation kept out of training (repeatable): evaluate on it "
        "to measure layouts the adapter never saw",
    )
    p.add_argument(
        "--first-seed",
        type=int,
        default=TRAINING_SEED_START,
        help=f"the first training seed (>= {TRAINING_SEED_START:,}; default that)",
    )
    p.add_argument(
        "--init-adapter",
        type=Path,
        default=None,
        help="continue training this adapter folder (its rank and alpha) instead of a fresh one",
    )
    p.add_argument("--exclude-language", action="append", default=[], metavar="LANG")
    p.add_argument("--exclude-layout", action="append", default=[], metavar="LAYOUT")
    p.add_argument(
        "--time-budget-minutes", type=float, default=None, help="stop after this, saving"
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"adapter folder ({DEFAULT_OUT})")
    p.add_argument("--model", type=Path, default=None, help="base model folder (the bundled one)")
    p.add_argument("--seed", type=int, default=0, help="torch/random seed and example order")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--log-every", type=int, default=10, help="steps between progress lines")


def run(args: argparse.Namespace, command: str) -> int:
    """Train from parsed options; ``command`` (how it was invoked) goes into the recipe."""
    if not 0 < args.examples <= TRAINING_SEED_END - TRAINING_SEED_START:
        print(f"--examples must be 1..{TRAINING_SEED_END - TRAINING_SEED_START}", file=sys.stderr)
        return 2
    if not 0.0 <= args.variant_share <= 1.0 or not 0.0 <= args.fuzz_share <= 1.0:
        print("--variant-share and --fuzz-share must be within 0..1", file=sys.stderr)
        return 2
    if not TRAINING_SEED_START <= args.first_seed < TRAINING_SEED_END - args.examples:
        print(
            f"--first-seed must leave --examples seeds below {TRAINING_SEED_END:,} and be "
            f">= {TRAINING_SEED_START:,} (lower seeds are evaluation data)",
            file=sys.stderr,
        )
        return 2
    try:
        train(args, command)
    except (ValueError, FileNotFoundError) as exc:
        print(f"adapter: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.adapter_train", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(args_list), f"{parser.prog} {shlex.join(args_list)}")


if __name__ == "__main__":
    raise SystemExit(main())

"""Adapter training: examples mask the prompt, families pass through, training seeds stay apart."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks import adapter_train
from benchmarks.adapter_train import (
    DOCUMENT_VARIANTS,
    IGNORE,
    LANGUAGES,
    LAYOUTS,
    TRAINING_SEED_END,
    TRAINING_SEED_START,
    build_examples,
    collate,
    family_filter,
    fuzz_family_for,
    tokenize_example,
    variant_for,
)
from benchmarks.invoices.variants import Variant
from deployments.model_prepare import default_model_dir, is_prepared

ROOT = Path(__file__).resolve().parents[2]


class CharTokenizer:
    """One token per character; a chat template that frames each message."""

    eos_token_id = 2

    def apply_chat_template(
        self, messages: list[dict[str, str]], *, add_generation_prompt: bool, tokenize: bool
    ) -> str:
        assert add_generation_prompt and not tokenize
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return text + "<assistant>"

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        assert not add_special_tokens  # the template writes them; nothing may be added twice
        return [ord(c) for c in text]


def test_prompt_tokens_are_masked_and_the_answer_plus_eos_is_learned():
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "invoice"}]
    ids, labels = tokenize_example(CharTokenizer(), messages, '{"a":1}')
    prompt = [ord(c) for c in "<system>S<user>invoice<assistant>"]
    answer = [ord(c) for c in '{"a":1}'] + [CharTokenizer.eos_token_id]
    assert ids == prompt + answer
    assert labels == [IGNORE] * len(prompt) + answer
    assert len(ids) == len(labels)


def test_collate_pads_right_and_masks_padding_out_of_attention_and_loss():
    short = adapter_train.Example(1, [5, 6, 7], [IGNORE, 6, 7], "en", "table", 1)
    long = adapter_train.Example(2, [5, 6, 7, 8, 9], [IGNORE, IGNORE, 7, 8, 9], "de", "ledger", 2)
    batch = collate([short, long], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]]
    assert batch["labels"].tolist() == [[IGNORE, 6, 7, IGNORE, IGNORE], [IGNORE, IGNORE, 7, 8, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert short.prompt_tokens == 1 and long.prompt_tokens == 2


def test_real_examples_are_the_served_prompt_then_the_contract_answer():
    assert is_prepared(default_model_dir()), "run `make model` (make test does)"
    from transformers import AutoTokenizer

    from benchmarks.invoices.generator import generate_invoice
    from deployments.engine import render_prompt
    from pipeline.extraction import answer_for, prepare_call

    tokenizer = AutoTokenizer.from_pretrained(str(default_model_dir()))
    examples, skipped = build_examples(
        tokenizer, 2, max_line_items=2, max_seq_len=100_000, families={}
    )
    assert skipped == [] and [e.seed for e in examples] == [
        TRAINING_SEED_START,
        TRAINING_SEED_START + 1,
    ]
    for example in examples:
        inv = generate_invoice(example.seed, max_line_items=2)
        prompt = render_prompt(tokenizer, prepare_call(inv.ocr_text).messages)
        n = len(prompt)
        assert example.input_ids[:n] == prompt  # exactly what the engine will be sent
        assert example.labels[:n] == [IGNORE] * n
        assert example.labels[n:] == example.input_ids[n:]  # every answer token is learned
        assert example.input_ids[-1] == tokenizer.eos_token_id
        answer = tokenizer.decode(example.input_ids[n:-1])
        assert answer == answer_for(inv.truth, inv.ocr_text)
        assert (example.language, example.layout) == (inv.language, inv.layout)
        assert example.line_items == len(inv.truth.line_items)
    # Too long for the limit: skipped and counted, the next seed drawn, never truncated.
    limit = min(len(e.input_ids) for e in examples) - 1
    fewer, skipped = build_examples(tokenizer, 1, max_line_items=2, max_seq_len=limit, families={})
    assert skipped and all(len(e.input_ids) <= limit for e in fewer)
    assert fewer[0].seed == TRAINING_SEED_START + len(skipped)


def _injected_iban(text: str, real: str) -> str:
    """The IBAN an injection prints, other than the supplier's ``real`` one."""
    compact = [
        m.group().replace(" ", "")
        for m in re.finditer(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}(?: ?[A-Z0-9]{1,3})?\b", text)
    ]
    others = {c for c in compact if c != real and not real.startswith(c)}
    assert len(others) == 1, f"the injection prints one second IBAN: {compact}"
    return others.pop()


def test_a_share_of_training_invoices_carries_a_printed_variant():
    seeds = range(TRAINING_SEED_START, TRAINING_SEED_START + 2000)
    assert {variant_for(s, 0.0) for s in seeds} == {Variant.CLEAN}
    assert {variant_for(s, 1.0) for s in seeds} == set(DOCUMENT_VARIANTS)
    drawn = [variant_for(s, 0.25) for s in seeds]
    assert 400 <= sum(v is not Variant.CLEAN for v in drawn) <= 600
    assert drawn == [variant_for(s, 0.25) for s in seeds]  # deterministic in the seed
    assert Variant.INVENTED_IBAN not in DOCUMENT_VARIANTS  # a model's fault, not a document's


def test_an_injected_invoice_teaches_the_real_iban_never_the_attackers():
    from benchmarks.invoices.generator import generate_invoice
    from pipeline.extraction import answer_for

    seed = next(
        s
        for s in range(TRAINING_SEED_START, TRAINING_SEED_END)
        if variant_for(s, 1.0) is Variant.PROMPT_INJECTION
    )
    tokenizer = CharTokenizer()
    (example,), _ = build_examples(
        tokenizer,
        1,
        max_line_items=2,
        max_seq_len=100_000,
        families={},
        first_seed=seed,
        variant_share=1.0,
    )
    inv = generate_invoice(seed, Variant.PROMPT_INJECTION, max_line_items=2)
    answer = "".join(chr(i) for i in example.input_ids[example.prompt_tokens : -1])
    assert example.variant == "prompt_injection"
    assert answer == answer_for(inv.truth, inv.ocr_text)
    assert inv.truth.iban is not None
    real = inv.truth.iban.value
    attacker = _injected_iban(inv.ocr_text, real)
    compact = answer.replace(" ", "")
    assert real in compact and attacker not in compact


def test_a_share_of_training_invoices_is_printed_by_the_fuzzer_without_excluded_layouts():
    from benchmarks.fuzz.transforms import BY_NAME, compatible

    seeds = range(TRAINING_SEED_START, TRAINING_SEED_START + 2000)
    assert {fuzz_family_for(s, 0.0) for s in seeds} == {None}
    held_out = ["items_prose", "price_before_qty"]
    drawn = [fuzz_family_for(s, 0.5, held_out) for s in seeds]
    fuzzed = [f for f in drawn if f is not None]
    assert 850 <= len(fuzzed) <= 1150
    assert drawn == [fuzz_family_for(s, 0.5, held_out) for s in seeds]  # deterministic
    names = {n for f in fuzzed for n in f}
    assert names == set(BY_NAME) - set(held_out)  # every other one is drawn, none held out
    assert any(len(f) == 2 for f in fuzzed) and all(compatible(f) for f in fuzzed)
    with pytest.raises(ValueError, match="unknown transformations"):
        fuzz_family_for(TRAINING_SEED_START, 0.5, ["no_such_layout"])
    with pytest.raises(ValueError, match="every transformation"):
        fuzz_family_for(TRAINING_SEED_START, 0.5, list(BY_NAME))


def test_a_fuzzed_training_invoice_teaches_the_fuzzers_truth():
    from benchmarks.fuzz.cases import fuzz_case
    from pipeline.extraction import answer_for

    seed = next(
        s
        for s in range(TRAINING_SEED_START, TRAINING_SEED_END)
        if fuzz_family_for(s, 1.0, ["items_prose"]) == ("price_before_qty",)
    )
    (example,), _ = build_examples(
        CharTokenizer(),
        1,
        max_line_items=3,
        max_seq_len=100_000,
        families={},
        first_seed=seed,
        fuzz_share=1.0,
        exclude_transforms=["items_prose"],
    )
    from deployments.engine import render_prompt
    from pipeline.extraction import prepare_call

    case = fuzz_case(seed, ("price_before_qty",), max_line_items=3)
    answer = "".join(chr(i) for i in example.input_ids[example.prompt_tokens : -1])
    assert example.fuzz_family == "price_before_qty" and example.variant == "clean"
    served = render_prompt(CharTokenizer(), prepare_call(case.text).messages)
    assert example.input_ids[: example.prompt_tokens] == served  # the fuzzer's print
    assert answer == answer_for(case.truth, case.text)


def test_family_exclusions_need_a_generator_that_takes_them():
    def old_generator(seed: int, *, max_line_items: int = 200) -> None: ...

    def new_generator(
        seed: int, *, max_line_items: int = 200, languages: Any = None, layouts: Any = None
    ) -> None: ...

    assert family_filter([], [], old_generator) == {}  # nothing asked, nothing needed
    with pytest.raises(ValueError, match="languages=") as info:
        family_filter(["fr"], [], old_generator)
    assert "generate_invoice" in str(info.value)
    kept = family_filter(["fr"], ["ledger"], new_generator)
    assert kept == {
        "languages": tuple(x for x in LANGUAGES if x != "fr"),
        "layouts": tuple(x for x in LAYOUTS if x != "ledger"),
    }
    with pytest.raises(ValueError, match="unknown languages"):
        family_filter(["xx"], [], new_generator)
    with pytest.raises(ValueError, match="every layout"):
        family_filter([], list(LAYOUTS), new_generator)


def test_cli_refuses_an_unsupported_exclusion_before_loading_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    import benchmarks.invoices.generator

    def old_generator(seed: int, *, max_line_items: int = 200) -> None: ...

    monkeypatch.setattr(benchmarks.invoices.generator, "generate_invoice", old_generator)
    code = adapter_train.main(["--exclude-language", "fr", "--out", str(tmp_path / "a")])
    assert code == 2
    assert "--exclude-language" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


def test_fenceline_adapter_train_has_the_training_options():
    from benchmarks.cli import register
    from cluster.cli.entry import build_parser, subcommands

    subs = subcommands(plugins=False)
    register(subs)  # what the installed fenceline.commands entry point adds
    args = build_parser(subs).parse_args(
        ["adapter", "train", "--examples", "4", "--max-line-items", "2", "--out", "/tmp/x"]
    )
    assert (args.examples, args.max_line_items, args.out) == (4, 2, Path("/tmp/x"))
    assert args.handler.__name__ == "_adapter_train"


# -- training seeds are never evaluated ------------------------------------------------

TRAINING = range(TRAINING_SEED_START, TRAINING_SEED_END)


def disjoint(seeds: range) -> bool:
    return seeds.stop <= TRAINING.start or seeds.start >= TRAINING.stop


def test_training_seeds_are_disjoint_from_eval_demo_and_scenario_defaults():
    from benchmarks.demo.corpus import DemoOptions
    from benchmarks.eval.run import build_parser, generated
    from benchmarks.scenario import known_scenarios, load_scenario

    for eval_seed in (
        inspect.signature(generated).parameters["seed"].default,
        build_parser().parse_args([]).seed,
    ):
        assert disjoint(range(eval_seed, eval_seed + 100_000))  # eval corpora up to 100k
    demo = DemoOptions()
    assert disjoint(range(demo.seed, demo.seed + demo.invoices))
    for name in known_scenarios():
        scenario = load_scenario(name)
        first = scenario.seed * 1000  # benchmarks.scenario.scenario_corpus
        # consistent_corpus draws at most 50 * corpus + 100 seeds.
        assert disjoint(range(first, first + 50 * scenario.documents.corpus + 101)), name


_LITERAL_SEED = re.compile(
    r"(?:generate_invoice\(\s*|generate_corpus\([^)]*seed=|seed\s*=\s*|range\()(\d[\d_]*)"
)


def test_no_test_or_benchmark_draws_a_training_seed():
    seen, hits = 0, []
    for folder in ("tests", "benchmarks", "cluster"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == Path(__file__).name:
                continue
            for match in _LITERAL_SEED.finditer(path.read_text()):
                seen += 1
                if int(match.group(1).replace("_", "")) >= TRAINING_SEED_START:
                    hits.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert seen > 20  # the pattern does find the literal seeds
    assert hits == []


def test_the_training_command_records_how_it_was_invoked(monkeypatch: pytest.MonkeyPatch):
    seen: dict[str, Any] = {}

    def fake_train(args: argparse.Namespace, command: str) -> dict[str, Any]:
        seen.update(args=args, command=command)
        return {}

    monkeypatch.setattr(adapter_train, "train", fake_train)
    assert adapter_train.main(["--examples", "3", "--rank", "8"]) == 0
    assert seen["command"] == "python -m benchmarks.adapter_train --examples 3 --rank 8"
    assert seen["args"].rank == 8 and seen["args"].examples == 3
    assert adapter_train.main(["--examples", "0"]) == 2

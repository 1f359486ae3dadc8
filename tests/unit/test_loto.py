"""Leave-one-transformation-out: the plan trains alike but for one exclusion, scores on
evaluation seeds only, reuses only a run of the same recipe, and reports what it saw."""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from benchmarks.adapter_train import TRAINING_SEED_START
from benchmarks.eval.bounds import false_accept_bound
from benchmarks.eval.engines import with_adapter
from benchmarks.fuzz.campaign import Trial
from benchmarks.loto.command import recipe_options, reusable
from benchmarks.loto.plan import CONTROL, LotoPlan, without
from benchmarks.loto.report import compare, examples_of, markdown


def _plan(tmp_path: Path, *transforms: str, **kw: Any) -> LotoPlan:
    init = tmp_path / "init"
    init.mkdir(exist_ok=True)
    (init / "adapter_model.safetensors").write_bytes(b"weights")
    return LotoPlan(transforms=transforms, init_adapter=init, out=tmp_path / "run", **kw)


def _without_option(argv: list[str], option: str) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        else:
            out.append(arg)
    return out


def test_each_adapter_differs_from_the_control_by_its_one_exclusion(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "columns", "letter")
    assert plan.adapters == (CONTROL, "without-columns", "without-letter")
    control = plan.train_argv(CONTROL)
    assert "--exclude-transform" not in control
    assert control[control.index("--init-adapter") + 1] == str(plan.init_adapter)
    for t in ("columns", "letter"):
        argv = plan.train_argv(without(t))
        i = argv.index("--exclude-transform")
        assert argv[i + 1] == t and argv.count("--exclude-transform") == 1
        assert argv[argv.index("--out") + 1] == str(plan.adapter_dir(without(t)))
        # Same recipe otherwise: the same options, the same training seeds.
        assert _without_option(_without_option(argv, "--exclude-transform"), "--out") == (
            _without_option(control, "--out")
        )
    with pytest.raises(ValueError):
        plan.excluded("without-noise")  # not in this plan


def test_the_plan_refuses_evaluation_seeds_in_training_and_unknown_names(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="below"):
        _plan(tmp_path, "columns", eval_seed=TRAINING_SEED_START - 5, eval_invoices=10)
    with pytest.raises(ValueError, match="unknown"):
        _plan(tmp_path, "columns", "no_such_layout")
    with pytest.raises(ValueError, match="twice"):
        _plan(tmp_path, "columns", "columns")
    with pytest.raises(ValueError):
        _plan(tmp_path, "columns", first_seed=TRAINING_SEED_START - 1)
    plan = _plan(tmp_path, "columns", "noise", eval_seed=9000, eval_invoices=4)
    pairs = plan.eval_pairs(["noise"])
    assert pairs == [(s, ("noise",)) for s in range(9000, 9004)]
    assert all(s < TRAINING_SEED_START for s, _ in plan.eval_pairs(plan.transforms))


def test_steps_train_the_control_first_and_finish_each_transformation_in_turn(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, "columns", "letter")
    assert plan.steps() == [
        ("train", CONTROL, None),
        ("train", "without-columns", None),
        ("eval", CONTROL, "columns"),
        ("eval", "without-columns", "columns"),
        ("train", "without-letter", None),
        ("eval", CONTROL, "letter"),
        ("eval", "without-letter", "letter"),
    ]
    argv = plan.eval_argv("without-letter", "letter")
    assert argv[argv.index("--adapter") + 1] == str(plan.adapter_dir("without-letter"))
    assert argv[argv.index("--dataset") + 1] == str(plan.dataset_path("letter"))
    assert argv[argv.index("--engine") + 1] == "vllm"


def _train(plan: LotoPlan, name: str, command: list[str], init: bytes = b"weights") -> None:
    folder = plan.adapter_dir(name)
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"trained")
    manifest = {
        "command": shlex.join(["python", "-m", *command[2:]]),
        "init_adapter": {"sha256": hashlib.sha256(init).hexdigest()},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_an_adapter_is_reused_only_for_the_same_recipe_and_start(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "columns", "letter", time_budget_minutes=10)
    # Written by hand with other spellings and another folder: still the same recipe.
    by_hand = [
        "py", "-m", "benchmarks.adapter_train", "--init-adapter", "/elsewhere",
        "--examples", "120", "--first-seed", "1300000", "--fuzz-share", "0.6",
        "--variant-share", "0.25", "--max-line-items", "8", "--lr", "2e-4", "--epochs", "1",
        "--batch-size", "1", "--max-seq-len", "1536", "--time-budget-minutes", "10",
        "--out", "/work/elsewhere",
    ]  # fmt: skip
    assert recipe_options(by_hand) == recipe_options(plan.train_argv(CONTROL))
    _train(plan, CONTROL, by_hand)
    assert reusable(plan, CONTROL)
    # Trained without the wrong transformation, or from other weights: trained again.
    _train(plan, "without-columns", plan.train_argv("without-letter"))
    assert not reusable(plan, "without-columns")
    _train(plan, "without-letter", plan.train_argv("without-letter"), init=b"other")
    assert not reusable(plan, "without-letter")
    assert not reusable(plan, "without-noise")  # nothing there
    assert recipe_options(["python", "-m", "benchmarks.eval"]) is None


def _row(family: str, outcome: str, exact: bool, false_accept: bool = False) -> dict[str, Any]:
    return {
        "family": family,
        "outcome": outcome,
        "exact_match": exact,
        "false_accept": false_accept,
    }


def _trial(seed: int, family: str, decision: str, wrong: bool = False) -> Trial:
    diff = {"invoice_number": {"truth": ["1"], "got": ["2"]}} if wrong else {}
    return Trial(seed, family, "perfect", decision, (), diff)


def test_the_comparison_counts_each_column_on_the_transformation_alone() -> None:
    control = [
        _row("columns", "SUCCEEDED", True),
        _row("columns", "SUCCEEDED", True),
        _row("columns", "REVIEW_REQUIRED", False),
        _row("letter", "SUCCEEDED", True),  # another transformation: not counted
    ]
    left_out = [
        _row("columns", "SUCCEEDED", True),
        _row("columns", "SUCCEEDED", False, false_accept=True),
        _row("columns", "MALFORMED", False),
    ]
    ceiling = [
        _trial(1, "columns", "SUCCEEDED"),
        _trial(2, "columns", "SUCCEEDED"),
        _trial(3, "columns", "SUCCEEDED"),
        _trial(1, "letter", "SUCCEEDED", wrong=True),
    ]
    c = compare("columns", control, left_out, ceiling)
    assert c["control"] == {
        "invoices": 3, "accepted": 2, "accepted_right": 2, "reviewed": 1, "failed": 0,
        "false_accepts": 0, "false_accept_bound": false_accept_bound(0, 3),
    }  # fmt: skip
    assert c["left_out"]["accepted"] == 2 and c["left_out"]["accepted_right"] == 1
    assert c["left_out"]["false_accepts"] == 1 and c["left_out"]["failed"] == 1
    assert c["left_out"]["false_accept_bound"] == false_accept_bound(1, 3)
    assert c["ceiling"]["accepted_right"] == 3 and c["ceiling"]["false_accepts"] == 0
    assert c["gap"] == 1  # seeing columns in training got one more invoice right
    with pytest.raises(ValueError, match="different"):
        compare("columns", control[:2], left_out, ceiling)


def test_a_column_not_measured_is_said_so_and_has_no_gap() -> None:
    ceiling = [_trial(1, "noise", "SUCCEEDED"), _trial(2, "noise", "REVIEW_REQUIRED")]
    control = [_row("noise", "SUCCEEDED", True), _row("noise", "SUCCEEDED", True)]
    c = compare("noise", control, None, ceiling)
    assert c["left_out"] is None and c["gap"] is None
    assert c["ceiling"]["accepted_right"] == 1 and c["ceiling"]["reviewed"] == 1
    adapters = {CONTROL: {"steps": 10}, "without-noise": {"steps": 21}}
    text = markdown([c], {"commands": ["fenceline loto --transform noise"], "adapters": adapters})
    assert "Steps trained: control 10, without-noise 21." in text
    row = next(line for line in text.splitlines() if line.startswith("| `noise`"))
    assert "not measured" in row and "2/2 right" in row and row.endswith("| - | ? / ? |")
    assert "    fenceline loto --transform noise" in text


def test_the_report_says_how_often_each_adapter_trained_on_the_transformation() -> None:
    manifest = {"counts": {"fuzz_family": {"columns": 2, "columns+noise": 1, "noise": 4}}}
    assert examples_of(manifest, "columns") == 3
    assert examples_of(manifest, "noise") == 5
    assert examples_of(manifest, "letter") == 0
    assert examples_of({}, "columns") is None
    ceiling = [_trial(1, "letter", "SUCCEEDED")]
    rows = [_row("letter", "SUCCEEDED", True)]
    c = compare("letter", rows, rows, ceiling, {"control": 0, "left_out": None})
    row = next(line for line in markdown([c], {}).splitlines() if line.startswith("| `letter`"))
    assert row.endswith("| +0 | 0 / ? |")


def test_eval_can_serve_another_adapter_folder(tmp_path: Path) -> None:
    from deployments.pools import load_pools

    pools = load_pools(None)
    swapped = with_adapter(pools, tmp_path / "other")
    served = [p.lora for p in swapped.pools if p.lora is not None]
    assert served and all(lora.resolved_path() == (tmp_path / "other").resolve() for lora in served)
    assert [p.lora.max_rank for p in pools.pools if p.lora] == [lora.max_rank for lora in served]
    bare = pools.model_copy(
        update={"pools": [p.model_copy(update={"lora": None}) for p in pools.pools]}
    )
    with pytest.raises(ValueError, match="no pool"):
        with_adapter(bare, tmp_path)


def test_eval_refuses_an_adapter_without_vllm_or_without_weights(tmp_path: Path) -> None:
    from benchmarks.eval.run import main

    with pytest.raises(SystemExit) as exc:
        main(["--engine", "oracle", "--adapter", str(tmp_path), "-n", "1"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["--engine", "vllm", "--adapter", str(tmp_path), "-n", "1"])
    assert exc.value.code == 2


def test_fenceline_loto_is_a_benchmarks_command(tmp_path: Path, capsys: Any) -> None:
    from benchmarks.cli import register
    from cluster.cli.base import Subcommands
    from pipeline.settings import Settings

    plan = _plan(tmp_path, "columns")
    subs = Subcommands()
    register(subs)
    loto = subs.passthrough("loto")
    assert loto is not None
    argv = ["--plan", "--transform", "columns", "--init-adapter", str(plan.init_adapter),
            "--out", str(plan.out)]  # fmt: skip
    assert loto(argv, Settings()) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 4 and "--exclude-transform columns" in printed[1]
    assert (
        loto(["--plan", "--transform", "columns", "--init-adapter", str(tmp_path)], Settings()) == 2
    )

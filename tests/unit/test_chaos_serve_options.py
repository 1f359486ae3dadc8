"""``fenceline bench chaos --stack serve``: what the options select (no cluster started)."""

from __future__ import annotations

from benchmarks.chaos.cli import VLLM_KINDS, options_from
from benchmarks.chaos.schedule import CI_KINDS, PROVIDER_KINDS, FaultKind
from cluster.cli import build_parser


def test_the_harness_stack_stays_the_default() -> None:
    opts = options_from(build_parser().parse_args(["bench", "chaos"]))
    assert opts.serve is None and opts.kinds == CI_KINDS


def test_serve_stack_on_the_fake_provider_keeps_every_ci_kind() -> None:
    opts = options_from(build_parser().parse_args(["bench", "chaos", "--stack", "serve"]))
    assert opts.serve is not None and opts.serve.engine == "fake"
    assert opts.kinds == CI_KINDS
    assert opts.stack.attempt_timeout_s == 2.5  # the harness's timings


def test_serve_stack_on_vllm_leaves_the_provider_faults_out_and_slows_down() -> None:
    argv = ["bench", "chaos", "--stack", "serve", "--engine", "vllm-cpu", "--invoices", "10"]
    opts = options_from(build_parser().parse_args(argv))
    assert opts.serve is not None and opts.serve.engine == "vllm"
    assert opts.kinds == VLLM_KINDS and not set(opts.kinds) & PROVIDER_KINDS
    assert opts.stack.attempt_timeout_s == 600.0 and opts.stack.max_in_flight == 4
    assert opts.drain_timeout_s >= 1800


def test_kinds_pick_the_schedule() -> None:
    argv = ["bench", "chaos", "--stack", "serve", "--kinds", "pg_terminate, amqp_cut"]
    opts = options_from(build_parser().parse_args(argv))
    assert opts.kinds == (FaultKind.PG_TERMINATE, FaultKind.AMQP_CUT)

"""The chaos fault schedule: the seed alone decides it, faults never overlap."""

from __future__ import annotations

import itertools

from benchmarks.chaos.schedule import (
    ALL_KINDS,
    CI_KINDS,
    ONCE,
    PROVIDER_KINDS,
    FaultKind,
    fault_schedule,
    kinds_for,
    span,
)


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    a = fault_schedule(17, CI_KINDS, rounds=2)
    assert a == fault_schedule(17, CI_KINDS, rounds=2)
    assert a != fault_schedule(18, CI_KINDS, rounds=2)


def test_every_kind_comes_rounds_times_one_after_another() -> None:
    faults = fault_schedule(3, ALL_KINDS, rounds=3, start_s=5, drivers=4)
    kinds = [f.kind for f in faults]
    for kind in ALL_KINDS:
        want = 1 if kind in ONCE else 3
        assert kinds.count(kind) == want, kind
    assert faults[0].at >= 5
    for before, after in itertools.pairwise(faults):
        assert after.at > before.at + before.duration
    assert {f.target for f in faults} <= {0, 1, 2, 3}
    assert span(faults) == faults[-1].at + faults[-1].duration


def test_server_restarts_only_on_their_flags_and_provider_faults_only_on_the_fake() -> None:
    assert kinds_for() == CI_KINDS
    assert FaultKind.PG_RESTART not in CI_KINDS and FaultKind.RABBITMQ_RESTART not in CI_KINDS
    long = kinds_for(pg_restart=True)
    assert set(long) == set(CI_KINDS) | {FaultKind.PG_RESTART}
    faults = fault_schedule(17, long, rounds=3)
    assert [f.kind for f in faults].count(FaultKind.PG_RESTART) == 1  # the server is shared
    assert faults == fault_schedule(17, long, rounds=3)
    pg = next(f for f in faults if f.kind is FaultKind.PG_RESTART)
    assert pg.duration > 0  # the server stays down for a while
    real = kinds_for(rabbitmq_restart=True, fake_provider=False)
    assert FaultKind.RABBITMQ_RESTART in real and not set(real) & PROVIDER_KINDS


def test_cli_options_carry_the_pg_restart_and_the_engine() -> None:
    from benchmarks.chaos.cli import options_from
    from cluster.cli import build_parser

    args = build_parser().parse_args(
        ["bench", "chaos", "--invoices", "40", "--pg-restart", "--pg-version", "14"]
    )
    opts = options_from(args)
    assert FaultKind.PG_RESTART in opts.kinds
    assert opts.stack.pg_stop_command == "pg_ctlcluster 14 main stop -m fast"
    assert opts.stack.pg_start_command == "pg_ctlcluster 14 main start"
    assert not opts.stack.private_postgres  # an outside server was named
    plain = options_from(build_parser().parse_args(["bench", "chaos"]))
    assert plain.kinds == CI_KINDS and not plain.stack.pg_stop_command
    assert not plain.stack.private_postgres
    vllm = options_from(
        build_parser().parse_args(
            ["bench", "chaos", "--engine-url", "http://127.0.0.1:8000/v1", "--engine-model", "m"]
        )
    )
    assert (vllm.stack.engine_url, vllm.stack.engine_model) == ("http://127.0.0.1:8000/v1", "m")
    assert not set(vllm.kinds) & PROVIDER_KINDS


def test_pg_restart_alone_restarts_a_private_server_never_the_shared_one() -> None:
    from benchmarks.chaos.cli import options_from
    from cluster.cli import build_parser

    opts = options_from(build_parser().parse_args(["bench", "chaos", "--pg-restart"]))
    assert FaultKind.PG_RESTART in opts.kinds
    assert opts.stack.private_postgres
    assert (opts.stack.pg_stop_command, opts.stack.pg_start_command) == ("", "")
    private = options_from(build_parser().parse_args(["bench", "chaos", "--private-postgres"]))
    assert private.stack.private_postgres and FaultKind.PG_RESTART not in private.kinds


def test_the_stalled_writer_is_a_ci_kind_and_seeded() -> None:
    assert FaultKind.DRIVER_STALL_PAST_LEASE in CI_KINDS
    faults = fault_schedule(17, CI_KINDS)
    stall = [f for f in faults if f.kind is FaultKind.DRIVER_STALL_PAST_LEASE]
    assert len(stall) == 1 and stall == [
        f for f in fault_schedule(17, CI_KINDS) if f.kind is FaultKind.DRIVER_STALL_PAST_LEASE
    ]

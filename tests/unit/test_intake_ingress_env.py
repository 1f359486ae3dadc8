"""The Serve ingress switches ``fenceline up`` and the benchmarks set before Ray starts."""

from __future__ import annotations

import os

import yaml

from deployments.intake import PROXY_ENV, PROXY_PATH_ENV, PROXY_PORT_ENV, proxy_env_defaults
from kuberay.generate import ROOT


def test_haproxy_ingress_gets_its_own_ports_and_folder_per_head() -> None:
    first: dict[str, str] = {}
    second: dict[str, str] = {}
    proxy_env_defaults(first)
    proxy_env_defaults(second)
    for env in (first, second):
        assert env["RAY_SERVE_ENABLE_HA_PROXY"] == "1"
        assert env["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] == "2"
        assert env["RAY_SERVE_HAPROXY_METRICS_ENABLED"] == "0"
        ports = [int(env[k]) for k in PROXY_PORT_ENV]
        assert len(set(ports)) == len(ports) and all(p > 0 for p in ports)
        folder = env["RAY_SERVE_HAPROXY_SERVER_STATE_BASE"]
        assert os.path.isdir(folder)
        for key in PROXY_PATH_ENV:
            assert env[key].startswith(folder)
    # Two heads on one machine share none of Ray's fixed defaults (8404, 9101, /tmp/...).
    assert first["RAY_SERVE_HAPROXY_SOCKET_PATH"] != second["RAY_SERVE_HAPROXY_SOCKET_PATH"]
    assert first["RAY_SERVE_HAPROXY_CONFIG_FILE_LOC"] != second["RAY_SERVE_HAPROXY_CONFIG_FILE_LOC"]


def test_an_operators_values_win_and_the_python_proxy_needs_nothing_else() -> None:
    env = {"RAY_SERVE_ENABLE_HA_PROXY": "0", "RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE": "1"}
    proxy_env_defaults(env)
    assert env["RAY_SERVE_ENABLE_HA_PROXY"] == "0"
    assert env["RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE"] == "1"
    assert not set(PROXY_PORT_ENV) & set(env) and not set(PROXY_PATH_ENV) & set(env)
    chosen = {"RAY_SERVE_HAPROXY_STATS_PORT": "18404"}
    proxy_env_defaults(chosen)
    assert chosen["RAY_SERVE_HAPROXY_STATS_PORT"] == "18404"


def test_kuberay_pods_run_the_same_ingress_as_fenceline_up() -> None:
    configmap = yaml.safe_load((ROOT / "kuberay/base/settings.yaml").read_text())
    assert configmap["data"]["RAY_SERVE_ENABLE_HA_PROXY"] == PROXY_ENV["RAY_SERVE_ENABLE_HA_PROXY"]
    # uvicorn's own forwarding-header trust is off wherever Serve runs the intake.
    assert configmap["data"]["FORWARDED_ALLOW_IPS"] == PROXY_ENV["FORWARDED_ALLOW_IPS"] == ""


def test_serves_access_log_is_off_unless_asked_for() -> None:
    from deployments.intake import intake_app

    def access_log(args: dict[str, object]) -> bool:
        config = intake_app({"database_url": "postgresql://db/x", **args})._bound_deployment
        return bool(config._deployment_config.logging_config["enable_access_log"])

    assert access_log({}) is False
    assert access_log({"access_log": True}) is True
    assert access_log({"access_log": "true"}) is True

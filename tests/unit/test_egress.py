"""The SSRF guard: URL syntax, address classes, resolution and the pinned transport."""

from __future__ import annotations

import asyncio
import builtins
import datetime as dt
import ipaddress
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.delivery import EgressClient
from pipeline.delivery.egress import (
    PIN_EXTENSION,
    EgressGuard,
    EgressPolicy,
    address_problem,
    legacy_ipv4,
)
from pipeline.delivery.egress_client import PinnedTransport
from pipeline.errors import EgressBlocked
from tests.support.delivery import ServerThread
from tests.support.urls import hostile_urls

PROD = EgressGuard(EgressPolicy())
DEV = EgressGuard(EgressPolicy(allow_loopback_http=True))


def reason(guard: EgressGuard, url: str) -> str | None:
    try:
        guard.check_url(url)
    except EgressBlocked as exc:
        return exc.reason
    return None


def test_the_issue_matrix_is_refused_by_syntax_and_address_checks() -> None:
    matrix = {
        "https://127.1/": "numeric_host",
        "https://0177.0.0.1/": "numeric_host",
        "https://0x7f.1/": "numeric_host",
        "https://2130706433/": "numeric_host",
        "https://[::1]/": "loopback",
        "https://[::ffff:7f00:1]/": "ipv4_mapped_loopback",
        "https://[64:ff9b::7f00:1]/": "nat64_loopback",
        "https://[2002:7f00:1::]/": "6to4_loopback",
        "https://[::7f00:1]/": "ipv4_compatible",
        "https://169.254.169.254/": "metadata",
        "https://[fd00:ec2::254]/": "metadata",
        "https://100.64.0.1/": "cgnat",
        "https://10.1.2.3/": "private",
        "https://172.31.255.255/": "private",
        "https://192.168.1.1/": "private",
        "https://0.0.0.0/": "unspecified",
        "https://224.0.0.1/": "multicast",
        "https://[ff02::1]/": "multicast",
        "https://[fe80::1]/": "link_local",
        "https://[fc00::1]/": "unique_local",
        "https://localhost./": "loopback",
        "https://api.localhost/": "loopback",
        "https://metadata.google.internal/": "internal_name",
        "https://printer.local/": "internal_name",
        "https://intranet/": "internal_name",
        "file:///etc/passwd": "scheme",
        "gopher://erp.example.com/_x": "scheme",
        "ftp://erp.example.com/": "scheme",
        "http://erp.example.com/": "scheme",
        "https://a.com@127.0.0.1/": "userinfo",
        "https://a.com:pw@erp.example.com/": "userinfo",
        "https://erp.example.com\\@127.0.0.1/": "syntax",
        "https://erp.example.com /": "syntax",
        "https://bücher.example/": "syntax",
        "https://erp.example.com:8443/": "port",
        "https://erp.example.com:99999/": "port",
        "https://erp.example.com:0/": "port",
        "https://erp.example.com:00/": "port",
        "https://[::1/": "syntax",
        "https://[127.0.0.1]/": "syntax",
        "https://]/": "syntax",
        "https://[]/": "syntax",
        "https://a[b].example/": "syntax",
        "https://erp.example.com/#frag": "syntax",
        "https://[fe80::1%25eth0]/": "scoped_ipv6",
        "": "syntax",
    }
    assert {url: reason(PROD, url) for url in matrix} == matrix


def test_ordinary_https_urls_pass_the_syntax_checks() -> None:
    for url in (
        "https://erp.example.com/hook",
        "https://ERP.Example.com./hook?tenant=1",
        "https://xn--bcher-kva.example/",
        "https://deadbeef.cafe/",  # hex-looking labels, but a name
        "https://8.8.8.8/",
        "https://[2606:4700::1111]/",
    ):
        assert reason(PROD, url) is None, url
    target = PROD.check_url("https://ERP.Example.com./hook")
    assert (target.host, target.port, target.scheme) == ("erp.example.com", 443, "https")


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("10.0x10.1", "10.16.0.1"),
        ("169.254.43518", "169.254.169.254"),
        ("8.8.8.8", "8.8.8.8"),
        ("erp.example.com", None),
        ("deadbeef.cafe", None),
        ("1.2.3.example", None),
    ],
)
def test_legacy_numeric_hosts_normalise_like_inet_aton(host: str, address: str | None) -> None:
    got = legacy_ipv4(host)
    assert (str(got) if got is not None else None) == address


@pytest.mark.parametrize("host", ["1.2.3.4.5", "08.1.1.1", "256.1.1.1", "1.2.65536", "0x"])
def test_numeric_hosts_that_are_no_address_are_refused(host: str) -> None:
    with pytest.raises(EgressBlocked) as err:
        legacy_ipv4(host) if host != "0x" else PROD.check_url(f"https://{host}/")
    assert err.value.reason in ("numeric_host", "syntax")


def test_global_addresses_and_their_embedded_forms() -> None:
    ok = ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1"]
    for a in ok:
        assert address_problem(ipaddress.ip_address(a)) is None, a
    assert address_problem(ipaddress.ip_address("168.63.129.16")) == "metadata"
    assert address_problem(ipaddress.ip_address("100.100.100.200")) == "metadata"
    assert address_problem(ipaddress.ip_address("64:ff9b:1::1")) == "nat64_local"
    assert address_problem(ipaddress.ip_address("::ffff:10.0.0.1")) == "ipv4_mapped_private"
    assert address_problem(ipaddress.ip_address("2001:db8::1")) == "not_global"
    # The development switch admits plain loopback only, never its embedded forms.
    assert address_problem(ipaddress.ip_address("127.0.0.1"), allow_loopback=True) is None
    assert address_problem(ipaddress.ip_address("::1"), allow_loopback=True) is None
    mapped = ipaddress.ip_address("::ffff:127.0.0.1")
    assert address_problem(mapped, allow_loopback=True) == "ipv4_mapped_loopback"


def fixed(*answers: list[str]) -> Any:
    calls: list[str] = []
    queue = list(answers)

    async def resolver(host: str, port: int) -> list[str]:
        calls.append(host)
        if not queue:
            raise OSError("no more answers")
        return queue.pop(0)

    resolver.calls = calls  # type: ignore[attr-defined]
    return resolver


async def test_every_resolved_address_must_be_global() -> None:
    guard = EgressGuard(EgressPolicy(), fixed(["93.184.216.34", "10.0.0.7"]))
    with pytest.raises(EgressBlocked) as err:
        await guard.resolve("https://erp.example.com/")
    assert err.value.reason == "private"
    pinned = await EgressGuard(EgressPolicy(), fixed(["93.184.216.34", "2606:2800::1"])).resolve(
        "https://erp.example.com/"
    )
    assert (pinned.address, pinned.addresses) == (
        "93.184.216.34",
        ("93.184.216.34", "2606:2800::1"),
    )


async def test_rebinding_is_caught_because_each_use_resolves_once() -> None:
    resolver = fixed(["93.184.216.34"], ["127.0.0.1"])
    guard = EgressGuard(EgressPolicy(), resolver)
    await guard.resolve("https://erp.example.com/")  # registration
    with pytest.raises(EgressBlocked) as err:
        await guard.resolve("https://erp.example.com/")  # connect time
    assert err.value.reason == "loopback"
    assert resolver.calls == ["erp.example.com", "erp.example.com"]


async def test_unresolvable_names_are_refused() -> None:
    with pytest.raises(EgressBlocked) as err:
        await EgressGuard(EgressPolicy(), fixed()).resolve("https://erp.example.com/")
    assert err.value.reason == "unresolvable"
    with pytest.raises(EgressBlocked):
        await EgressGuard(EgressPolicy(), fixed([])).resolve("https://erp.example.com/")


async def test_development_switch_admits_loopback_http_only(caplog: Any) -> None:
    caplog.set_level("WARNING")
    dev = EgressGuard(EgressPolicy(allow_loopback_http=True), fixed(["127.0.0.1"], ["8.8.8.8"]))
    assert "DEVELOPMENT SWITCH ON" in caplog.text
    assert (await dev.resolve("http://erp.test:8080/")).address == "127.0.0.1"
    with pytest.raises(EgressBlocked) as err:
        await dev.resolve("http://erp.test:8080/")  # a name that now resolves globally
    assert err.value.reason == "scheme"
    assert reason(DEV, "http://127.0.0.1:8080/") is None
    assert reason(DEV, "http://[::1]:8080/") is None
    assert reason(DEV, "http://8.8.8.8/") == "scheme"
    assert reason(DEV, "http://10.0.0.1:80/") == "private"
    assert reason(DEV, "https://127.1:8080/") == "numeric_host"
    assert reason(DEV, "https://8.8.8.8:8443/") == "port"


async def test_pinned_transport_refuses_requests_the_guard_did_not_check() -> None:
    async with httpx.AsyncClient(transport=PinnedTransport()) as client:
        with pytest.raises(EgressBlocked) as err:
            await client.get("http://127.0.0.1:9/")
    assert err.value.reason == "unpinned"


def certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def echo_host(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    host = dict(scope["headers"]).get(b"host", b"")
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": host})


async def test_tls_goes_to_the_checked_address_with_the_original_name(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path, "erp.test")
    server = ServerThread(echo_host, ssl_certfile=str(cert), ssl_keyfile=str(key)).start()
    try:
        port = server.port
        trust = ssl.create_default_context(cafile=str(cert))
        policy = EgressPolicy(allowed_ports=frozenset({port}), allow_loopback_http=True)
        resolver = fixed(["127.0.0.1"], ["127.0.0.1"])
        client = EgressClient(EgressGuard(policy, resolver), timeout_seconds=5, verify=trust)
        ok = await client.post(f"https://erp.test:{port}/hook", b"{}", {})
        # Same address, another name: the certificate is checked against the name.
        wrong = await client.post(f"https://other.test:{port}/hook", b"{}", {})
        await client.aclose()
    finally:
        server.stop()
    assert (ok.status, ok.address, ok.body_excerpt) == (
        200,
        "127.0.0.1",
        f"erp.test:{port}".encode(),
    )
    assert wrong.status is None and wrong.error_class == "transport"
    assert "CERTIFICATE_VERIFY_FAILED" in (wrong.error or "") or "certificate" in (
        wrong.error or ""
    )


async def test_client_reports_blocked_destinations_without_connecting() -> None:
    client = EgressClient(PROD, timeout_seconds=1)
    outcome = await client.post("https://0x7f.1/", b"{}", {})
    await client.aclose()
    assert (outcome.status, outcome.error_class, outcome.address) == (None, "egress_blocked", None)
    assert outcome.error is not None and outcome.error.startswith("numeric_host")
    assert isinstance(PIN_EXTENSION, str)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(url=hostile_urls)
def test_every_url_problem_is_egress_blocked(url: str) -> None:
    # Whatever urlsplit or httpx make of the string: a Target or EgressBlocked, nothing else.
    for guard in (PROD, DEV):
        try:
            target = guard.check_url(url)
        except EgressBlocked as exc:
            assert exc.reason
            continue
        assert 1 <= target.port <= 65535
        assert target.scheme in ("https", "http") and target.host


async def _refusing_resolver(host: str, port: int) -> list[str]:
    raise OSError(f"no DNS in this test ({host}:{port})")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(url=hostile_urls)
async def test_the_client_never_raises_whatever_the_url(url: str) -> None:
    # Names never resolve and the only literals admitted are loopback (DEV) with a
    # closed port, or global ones with a tiny timeout: every call ends in an outcome.
    guard = EgressGuard(EgressPolicy(allow_loopback_http=True), resolver=_refusing_resolver)
    client = EgressClient(guard, timeout_seconds=0.05)
    try:
        outcome = await client.post(url, b"{}", {"webhook-id": "msg_1"})
    finally:
        await client.aclose()
    assert outcome.status is None or 100 <= outcome.status <= 599
    if outcome.status is None:
        assert outcome.error_class in ("egress_blocked", "transport", "timeout", "invalid_request")


async def test_the_client_turns_an_unsendable_header_into_an_outcome() -> None:
    guard = EgressGuard(EgressPolicy(allow_loopback_http=True))
    client = EgressClient(guard, timeout_seconds=1)
    outcome = await client.post("http://127.0.0.1:9/hook", b"{}", {"x-note": "caf\u00e9\u202e"})
    await client.aclose()
    assert (outcome.status, outcome.error_class) == (None, "invalid_request")


# ---------------------------------------------- the resolver inside the attempt (issue 45)
async def _never_answers(host: str, port: int) -> list[str]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def test_resolution_counts_against_the_attempts_timeout() -> None:
    client = EgressClient(EgressGuard(EgressPolicy(), _never_answers), timeout_seconds=0.2)
    try:
        outcome = await asyncio.wait_for(client.post("https://erp.example.com/", b"{}", {}), 5)
    finally:
        await client.aclose()
    assert (outcome.status, outcome.error_class, outcome.address) == (None, "timeout", None)
    assert outcome.latency_ms < 2000


def _raisable(cls: type[Exception]) -> bool:
    try:
        cls("boom")
    except Exception:
        return False
    return True


#: Every built-in exception type a resolver might raise, and answers no resolver should give.
_EXCEPTIONS = sorted(
    (
        c
        for c in vars(builtins).values()
        if isinstance(c, type) and issubclass(c, Exception) and _raisable(c)
    ),
    key=lambda c: c.__name__,
)
_ANSWERS = st.one_of(
    st.none(),
    st.integers(),
    st.text(max_size=20),
    st.lists(st.one_of(st.none(), st.integers(), st.binary(max_size=8), st.text(max_size=20))),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(error=st.sampled_from(_EXCEPTIONS) | st.none(), answer=_ANSWERS, message=st.text())
async def test_the_client_never_raises_whatever_the_resolver_does(
    error: type[Exception] | None, answer: Any, message: str
) -> None:
    async def resolver(host: str, port: int) -> Any:
        if error is not None:
            raise error(message)
        return answer

    client = EgressClient(EgressGuard(EgressPolicy(), resolver), timeout_seconds=0.05)
    try:
        outcome = await client.post("https://erp.example.com/hook", b"{}", {"webhook-id": "m"})
    finally:
        await client.aclose()
    assert outcome.status is None
    assert outcome.error_class in ("egress_blocked", "timeout", "transport"), outcome

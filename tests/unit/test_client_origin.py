"""The client's address and scheme (issue 45, defect 5): forwarding headers count only
when the connection's peer is a trusted proxy, read from the right past trusted hops."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from pipeline.api.client_origin import ClientOrigin, TrustedProxies
from pipeline.settings import Settings


def request(
    peer: str, headers: dict[str, str] | list[tuple[str, str]], scheme: str = "http"
) -> Request:
    items = headers.items() if isinstance(headers, dict) else headers
    return Request(
        {
            "type": "http",
            "method": "GET",
            "path": "/console/login",
            "scheme": scheme,
            "server": ("console.example", 80),
            "client": (peer, 50000),
            "headers": [(k.lower().encode(), v.encode("latin-1")) for k, v in items],
            "query_string": b"",
        }
    )


PROXIES = TrustedProxies.of(Settings(trusted_proxies="10.0.0.0/8, 192.0.2.1"))
FORWARDED = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}


def test_an_untrusted_peer_is_the_client_whatever_it_forwards() -> None:
    assert PROXIES.origin(request("198.51.100.4", FORWARDED)) == ClientOrigin("198.51.100.4", False)
    assert TrustedProxies().origin(request("10.1.1.1", FORWARDED)) == ClientOrigin(
        "10.1.1.1", False
    )  # none trusted by default


def test_a_trusted_proxy_names_the_client_and_its_scheme() -> None:
    assert PROXIES.origin(request("10.1.1.1", FORWARDED)) == ClientOrigin("203.0.113.9", True)
    assert PROXIES.origin(request("192.0.2.1", {"X-Forwarded-Proto": "http"}, "https")) == (
        ClientOrigin("192.0.2.1", False)
    )
    # TLS to this server itself is https with or without a proxy.
    assert PROXIES.origin(request("198.51.100.4", {}, "https")).https


@pytest.mark.parametrize(
    ("forwarded_for", "client"),
    [
        # The client's own header is left of what the trusted proxy appended.
        ("6.6.6.6, 203.0.113.9", "203.0.113.9"),
        # Past a chain of trusted proxies to the first untrusted hop.
        ("6.6.6.6, 203.0.113.9, 10.2.2.2, 192.0.2.1", "203.0.113.9"),
        # Two header lines read as one list.
        (["6.6.6.6", "203.0.113.9, 10.2.2.2"], "203.0.113.9"),
        # Junk stops the walk at the last trusted hop.
        ("203.0.113.9, not-an-address, 10.2.2.2", "10.2.2.2"),
        # Ports and IPv6 brackets are allowed.
        ("[2001:db8::1]:4711", "2001:db8::1"),
        ("203.0.113.9:4711", "203.0.113.9"),
        # No header: the proxy itself.
        ([], "10.1.1.1"),
    ],
)
def test_forwarded_for_is_read_from_the_right(forwarded_for: str | list[str], client: str) -> None:
    values = [forwarded_for] if isinstance(forwarded_for, str) else forwarded_for
    headers = [("X-Forwarded-For", v) for v in values]
    assert PROXIES.origin(request("10.1.1.1", headers)).address == client


def test_trusted_proxies_setting_is_validated() -> None:
    assert Settings(trusted_proxies='["10.0.0.1/8"]').trusted_proxies == ("10.0.0.0/8",)
    assert Settings(trusted_proxies="").trusted_proxies == ()
    with pytest.raises(ValueError):
        Settings(trusted_proxies="10.0.0.0/8,proxy.example")


_latin1 = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=60)


@settings(max_examples=300, deadline=None)
@given(
    forwarded_for=st.lists(
        st.one_of(
            _latin1, st.sampled_from(["10.0.0.1", "[::1]:80", "1.2.3.4:5", "::ffff:10.0.0.9"])
        ),
        max_size=20,
    ),
    proto=st.one_of(st.none(), _latin1),
    peer=st.sampled_from(["10.3.3.3", "::ffff:10.3.3.3", "198.51.100.4", "testclient", ""]),
)
def test_any_forwarding_header_gives_an_origin_and_never_an_error(
    forwarded_for: list[str], proto: str | None, peer: str
) -> None:
    headers = [("X-Forwarded-For", ", ".join(forwarded_for))]
    if proto is not None:
        headers.append(("X-Forwarded-Proto", proto))
    found = PROXIES.origin(request(peer, headers))
    assert found.address  # text, never empty
    if not PROXIES.trusts(ipaddress.ip_address(peer) if _is_ip(peer) else None):
        assert found.address == (peer or "unknown") and not found.https


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True

"""Who sent a request and whether it came over TLS, believing forwarding headers only
from trusted proxies (issue 45, defect 5).

The console throttles sign-ins per client address and marks its cookies
``Secure`` when the browser spoke https. Behind a reverse proxy the connection's
peer is the proxy and the scheme it used is http, so both facts travel in
``X-Forwarded-For`` and ``X-Forwarded-Proto``, which any client can also send.
Invariants:

* The headers are read only when the connection's peer is in
  ``Settings.trusted_proxies``; from any other peer the peer is the client and
  the connection's own scheme decides https. A client cannot choose the address
  it is throttled as, nor talk a cookie into or out of ``Secure``, by a header.
* ``X-Forwarded-For`` is read from the right (the hop the trusted proxy itself
  appended) leftwards, past every trusted address, to the first one that is not:
  that is the client as the outermost trusted proxy saw it. Entries further left
  are the client's own words and are never read. An entry that is not an address
  stops the walk at the last trusted hop.
* ``X-Forwarded-Proto``: the value the nearest proxy set (the last one) decides.

The HTTP server must leave the peer alone for this to hold: Fenceline's
(:func:`pipeline.api.server.server_config`) turns uvicorn's own proxy-header
rewriting off, which would otherwise believe any peer on 127.0.0.1 or ::1
(``FORWARDED_ALLOW_IPS``). Under Ray Serve, ``deployments.intake.PROXY_ENV`` and the
KubeRay ConfigMap set ``FORWARDED_ALLOW_IPS`` empty for Serve's HTTP servers.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from starlette.requests import HTTPConnection

from pipeline.settings import Settings

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
#: How many X-Forwarded-For entries are read at most (a chain of proxies is short).
MAX_HOPS = 16


@dataclass(frozen=True)
class ClientOrigin:
    """The client's address (as text) and whether it spoke https to the first hop."""

    address: str
    https: bool


def _address(text: str) -> _Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class TrustedProxies:
    """The proxies whose forwarding headers are believed (``Settings.trusted_proxies``)."""

    def __init__(self, networks: tuple[str, ...] = ()) -> None:
        self.networks: tuple[_Network, ...] = tuple(
            ipaddress.ip_network(n, strict=False) for n in networks
        )

    @classmethod
    def of(cls, settings: Settings) -> TrustedProxies:
        return cls(settings.trusted_proxies)

    def trusts(self, address: _Address | None) -> bool:
        if address is None:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.networks)

    def origin(self, conn: HTTPConnection) -> ClientOrigin:
        """The client and scheme of ``conn`` (a request or a websocket)."""
        peer_text = conn.client.host if conn.client is not None and conn.client.host else "unknown"
        https = conn.url.scheme in ("https", "wss")
        peer = _address(peer_text)
        if not self.trusts(peer):
            return ClientOrigin(peer_text, https)
        client: _Address | None = peer
        hops = [
            hop
            for value in conn.headers.getlist("x-forwarded-for")
            for hop in value.split(",")
            if hop.strip()
        ]
        for hop in reversed(hops[-MAX_HOPS:]):
            found = _address(hop)
            if found is None:
                break
            client = found
            if not self.trusts(found):
                break
        protos = [
            p.strip().lower()
            for v in conn.headers.getlist("x-forwarded-proto")
            for p in v.split(",")
        ]
        if protos and protos[-1]:
            https = protos[-1] == "https"
        return ClientOrigin(str(client), https)

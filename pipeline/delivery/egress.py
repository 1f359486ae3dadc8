"""The SSRF guard: which destinations a webhook may reach, and a client that only goes there.

URL string checks alone are not an SSRF boundary (spec §5), so the guard has
three layers and the client uses all of them on every attempt:

1. **Syntax** (:meth:`EgressGuard.check_url`): ``https`` only, an allowed port, no
   userinfo, no backslashes / whitespace / control characters, ASCII (punycode)
   host names, no single-label or ``localhost`` / ``.local`` / ``.internal`` names,
   and no legacy numeric host forms (``127.1``, ``0177.0.0.1``, ``0x7f.1``,
   ``2130706433``): a host whose last label is a number must be a canonical
   dotted quad. Two URL parsers (``urllib`` and ``httpx``) must agree on
   scheme, host and port, so a parser differential cannot smuggle a host.
2. **Resolution once** (:meth:`EgressGuard.resolve`): every address the name
   resolves to must be global — not loopback, private, link-local, CGNAT,
   unique-local, multicast, unspecified, reserved, a cloud metadata address, nor
   an IPv4-mapped / IPv4-compatible / NAT64 / 6to4 / Teredo form of one.
3. **Pinning** (:class:`~pipeline.delivery.egress_client.PinnedTransport`): the
   request connects to the checked address itself, with the original ``Host``
   header and TLS SNI / certificate name, so a second DNS answer (rebinding) is
   never consulted. Redirects are never followed; a request without a pin is
   refused.

The development switch (``Settings.delivery_allow_loopback_http``) additionally
admits loopback addresses (and plain ``http`` to them) for the local demo and
tests; every guard built with it logs a warning.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from pipeline.errors import EgressBlocked

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: host, port → the addresses the name resolves to (strings). Injectable for tests.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

#: The request extension carrying the checked address to :class:`PinnedTransport`.
PIN_EXTENSION = "fenceline.pinned_address"
MAX_URL_LENGTH = 2048

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network
#: IPv4 ranges refused by name (``is_global`` misses some, and names make errors readable).
_V4_FORBIDDEN: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("0.0.0.0/8"), "unspecified"),
    (_V4("10.0.0.0/8"), "private"),
    (_V4("100.64.0.0/10"), "cgnat"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("169.254.0.0/16"), "link_local"),
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.0.0.0/24"), "ietf_reserved"),
    (_V4("192.0.2.0/24"), "documentation"),
    (_V4("192.88.99.0/24"), "relay_anycast"),
    (_V4("192.168.0.0/16"), "private"),
    (_V4("198.18.0.0/15"), "benchmarking"),
    (_V4("198.51.100.0/24"), "documentation"),
    (_V4("203.0.113.0/24"), "documentation"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("240.0.0.0/4"), "reserved"),
)
#: Cloud metadata / host-agent addresses that are (or may be) globally routable.
_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "168.63.129.16", "100.100.100.200", "fd00:ec2::254")
)
_NAT64 = _V6("64:ff9b::/96")
_NAT64_LOCAL = _V6("64:ff9b:1::/48")
_IPV4_COMPATIBLE = _V6("::/96")
_NUMBER_LABEL = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")
_HOST_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")
_FORBIDDEN_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa")


@dataclass(frozen=True)
class EgressPolicy:
    """What the guard admits.

    Attributes:
        allowed_ports: explicit or default ports a URL may use.
        allow_loopback_http: development switch: admit loopback addresses (any
            port) and plain ``http`` to them; nothing else changes.
    """

    allowed_ports: frozenset[int] = frozenset({443})
    allow_loopback_http: bool = False


@dataclass(frozen=True)
class Target:
    """A syntactically acceptable URL, split into the parts the guard checked."""

    url: str
    scheme: str
    host: str  # lower-case, no brackets, no trailing dot
    port: int
    literal: IPAddress | None


@dataclass(frozen=True)
class PinnedTarget:
    """A target whose every resolved address passed; ``address`` is the one to connect to."""

    target: Target
    address: str
    addresses: tuple[str, ...]


def egress_blocked(reason: str, message: str) -> EgressBlocked:
    return EgressBlocked(message, reason=reason)


def address_problem(ip: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why ``ip`` may not be called, or None when it is a global unicast address.

    Embedded IPv4 addresses (mapped, NAT64, 6to4, Teredo) are judged as the IPv4
    address they carry, never with the loopback allowance.
    """
    if ip in _METADATA:
        return "metadata"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "scoped_ipv6"
        embedded: tuple[str, ipaddress.IPv4Address] | None = None
        if ip.ipv4_mapped is not None:
            embedded = ("ipv4_mapped", ip.ipv4_mapped)
        elif ip in _NAT64:
            embedded = ("nat64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        elif ip in _NAT64_LOCAL:
            return "nat64_local"
        elif ip.sixtofour is not None:
            embedded = ("6to4", ip.sixtofour)
        elif ip.teredo is not None:
            return "teredo"
        elif ip in _IPV4_COMPATIBLE and not ip.is_loopback and not ip.is_unspecified:
            return "ipv4_compatible"
        if embedded is not None:
            # The packet ends up at the embedded IPv4 address: judge that address.
            form, v4 = embedded
            inner = address_problem(v4)
            return f"{form}_{inner}" if inner is not None else None
        if ip.is_loopback:
            return None if allow_loopback else "loopback"
        if ip.is_multicast:
            return "multicast"
        if ip.is_unspecified:
            return "unspecified"
        if ip.is_link_local:
            return "link_local"
        if ip.is_site_local:
            return "site_local"
        if ip in _V6("fc00::/7"):
            return "unique_local"
        if ip.is_private or ip.is_reserved or not ip.is_global:
            return "not_global"
        return None
    for net, reason in _V4_FORBIDDEN:
        if ip in net:
            if reason == "loopback" and allow_loopback:
                return None
            return reason
    if ip == ipaddress.IPv4Address("255.255.255.255"):
        return "broadcast"
    if ip.is_private or ip.is_reserved or ip.is_multicast or not ip.is_global:
        return "not_global"
    return None


def _parse_number(label: str) -> int | None:
    try:
        if label[:2].lower() == "0x":
            return int(label[2:] or "0", 16)
        if len(label) > 1 and label.startswith("0"):
            return int(label, 8)
        return int(label, 10)
    except ValueError:
        return None


def legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """What a resolver's ``inet_aton`` would make of a numeric host, if anything.

    Follows the WHATWG URL rule: a host whose last label is a number is an IPv4
    address in one of the legacy forms (``127.1``, ``0x7f.1``, ``0177.0.0.1``,
    ``2130706433``). Returns None for a domain name.

    Raises:
        EgressBlocked: numeric-looking but not a valid address at all.
    """
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels = labels[:-1]
    if not labels or not _NUMBER_LABEL.match(labels[-1]):
        return None
    numbers = [_parse_number(label) if _NUMBER_LABEL.match(label) else None for label in labels]
    if len(numbers) > 4 or any(n is None for n in numbers):
        raise egress_blocked("numeric_host", f"host {host!r} is neither a domain nor an address")
    values = [n for n in numbers if n is not None]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        raise egress_blocked("numeric_host", f"host {host!r} is out of range")
    value = 0
    for v in head:
        value = (value << 8) | v
    value = (value << (8 * (5 - len(values)))) | last
    return ipaddress.IPv4Address(value)


class EgressGuard:
    """Decides whether a webhook URL may be called, and pins the address to call.

    Args:
        policy: ports and the development switch.
        resolver: ``(host, port) -> addresses``; defaults to the system resolver.
    """

    def __init__(self, policy: EgressPolicy | None = None, resolver: Resolver | None = None):
        self.policy = policy or EgressPolicy()
        self.resolver: Resolver = resolver or system_resolver
        if self.policy.allow_loopback_http:
            log.warning(
                "egress guard: DEVELOPMENT SWITCH ON - loopback destinations and plain http "
                "to them are allowed (FENCELINE_DELIVERY_ALLOW_LOOPBACK_HTTP); never in production"
            )

    def check_url(self, url: str) -> Target:
        """Syntactic checks that need no DNS.

        Every problem with the string is an :class:`EgressBlocked`, whatever the
        parsers make of it: ``urlsplit`` raises a bare ``ValueError`` for
        malformed brackets (``https://[::1/``, ``https://[127.0.0.1]/``), and a
        parser's own error must never escape as anything else (the API would
        answer 500, and :meth:`EgressClient.post` promises never to raise).

        Raises:
            EgressBlocked: the URL is refused; ``reason`` says by which rule.
        """
        try:
            return self._check_url(url)
        except EgressBlocked:
            raise
        except (ValueError, TypeError, UnicodeError, httpx.InvalidURL) as exc:
            raise egress_blocked("syntax", f"malformed URL: {exc}"[:300]) from None

    def _check_url(self, url: str) -> Target:
        if not isinstance(url, str) or not url:
            raise egress_blocked("syntax", "empty URL")
        if len(url) > MAX_URL_LENGTH:
            raise egress_blocked("syntax", "URL too long")
        if not url.isascii() or any(c.isspace() or ord(c) < 0x21 or c == "\\" for c in url):
            raise egress_blocked("syntax", "URL has non-ASCII, whitespace, control or backslash")
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("https", "http"):
            raise egress_blocked(
                "scheme", f"scheme {scheme or '(none)'!r} is not allowed: https only"
            )
        if scheme == "http" and not self.policy.allow_loopback_http:
            raise egress_blocked("scheme", "plain http is not allowed: https only")
        if "@" in parts.netloc or parts.username is not None or parts.password is not None:
            raise egress_blocked("userinfo", "credentials in the URL are not allowed")
        if parts.fragment:
            raise egress_blocked("syntax", "a fragment is meaningless in a webhook URL")
        raw_host = parts.hostname or ""
        try:
            explicit = parts.port
        except ValueError as exc:
            raise egress_blocked("port", f"bad port: {exc}") from None
        if explicit is not None and not 1 <= explicit <= 65535:
            # ``parts.port or default`` would read port 0 as the default port.
            raise egress_blocked("port", f"port {explicit} is out of range 1-65535")
        port = explicit if explicit is not None else (443 if scheme == "https" else 80)
        host = raw_host[:-1] if raw_host.endswith(".") else raw_host
        if not host:
            raise egress_blocked("syntax", "URL has no host")
        literal: IPAddress | None = None
        if ":" in host:
            if "%" in host:
                raise egress_blocked("scoped_ipv6", "IPv6 zone identifiers are not allowed")
            try:
                literal = ipaddress.IPv6Address(host)
            except ValueError:
                raise egress_blocked("syntax", f"bad IPv6 literal {host!r}") from None
        else:
            legacy = legacy_ipv4(raw_host)
            if legacy is not None:
                if str(legacy) != raw_host:
                    raise egress_blocked(
                        "numeric_host",
                        f"host {raw_host!r} is a legacy numeric form of {legacy}: "
                        "write a canonical address or a name",
                    )
                literal = legacy
            else:
                self._check_name(host)
        try:
            other = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise egress_blocked("syntax", f"unparseable URL: {exc}") from None
        if (
            other.scheme != scheme
            or other.raw_host.decode("ascii").lower() != raw_host
            or (other.port or port) != port
        ):
            raise egress_blocked("syntax", "URL parsers disagree about its destination")
        dev = self.policy.allow_loopback_http
        if literal is not None:
            problem = address_problem(literal, allow_loopback=dev)
            if problem is not None:
                raise egress_blocked(problem, f"address {literal} is not allowed ({problem})")
            if (port not in self.policy.allowed_ports or scheme == "http") and not (
                dev and literal.is_loopback
            ):
                what = "plain http" if scheme == "http" else f"port {port}"
                raise egress_blocked(
                    "scheme" if scheme == "http" else "port", f"{what} is not allowed"
                )
        elif port not in self.policy.allowed_ports and not dev:
            raise egress_blocked("port", f"port {port} is not allowed")
        # A name with http or an unlisted port (development switch only) is decided
        # after resolution: every address must then be loopback.
        return Target(url=url, scheme=scheme, host=host, port=port, literal=literal)

    def _check_name(self, host: str) -> None:
        if len(host) > 253:
            raise egress_blocked("syntax", "host name too long")
        labels = host.split(".")
        if not all(_HOST_LABEL.match(label) for label in labels):
            raise egress_blocked("syntax", f"host {host!r} is not a valid ASCII (punycode) name")
        if _is_loopback_name(host):
            if self.policy.allow_loopback_http:
                return
            raise egress_blocked("loopback", f"host {host!r} names this machine")
        if host.endswith(_FORBIDDEN_SUFFIXES):
            raise egress_blocked("internal_name", f"host {host!r} is a local-only name")
        if len(labels) < 2:
            raise egress_blocked(
                "internal_name", f"single-label host {host!r} resolves via search paths"
            )

    async def resolve(self, url: str) -> PinnedTarget:
        """Check ``url``, resolve its host once, and pin an address every answer agrees on.

        Raises:
            EgressBlocked: the URL, or any address the host resolves to, is refused;
                a resolver that fails in any way, or answers anything but address
                strings, is ``unresolvable``.
        """
        target = self.check_url(url)
        if target.literal is not None:
            addrs: list[IPAddress] = [target.literal]
        else:
            try:
                answers = list(await self.resolver(target.host, target.port))
            except Exception as exc:
                # The resolver is an outside edge (the system's, or one injected): any
                # failure of it, of whatever type, means no address to check.
                raise egress_blocked(
                    "unresolvable", f"cannot resolve {target.host!r}: {type(exc).__name__}: {exc}"
                ) from None
            addrs = []
            for a in answers:
                try:
                    if not isinstance(a, str):  # ip_address would read an int as IPv4
                        raise ValueError(a)
                    addrs.append(ipaddress.ip_address(a))
                except ValueError:
                    raise egress_blocked("unresolvable", f"resolver returned {a!r}") from None
            if not addrs:
                raise egress_blocked("unresolvable", f"{target.host!r} has no addresses")
        allow_loopback = self.policy.allow_loopback_http
        for ip in addrs:
            problem = address_problem(ip, allow_loopback=allow_loopback)
            if problem is not None:
                raise egress_blocked(problem, f"{target.host!r} resolves to {ip} ({problem})")
        all_loopback = all(ip.is_loopback for ip in addrs)
        if target.scheme == "http" and not all_loopback:
            raise egress_blocked("scheme", "plain http is only allowed to loopback (development)")
        if target.port not in self.policy.allowed_ports and not (allow_loopback and all_loopback):
            raise egress_blocked("port", f"port {target.port} is not allowed")
        unique = tuple(dict.fromkeys(str(ip) for ip in addrs))
        return PinnedTarget(target=target, address=unique[0], addresses=unique)


def _is_loopback_name(host: str) -> bool:
    return host == "localhost" or host.endswith(".localhost") or host == "localhost.localdomain"


async def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``getaddrinfo`` returns for ``host`` (TCP), in its order."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]

"""Hypothesis strategies for hostile webhook URLs.

The sweep of issue 16 found URLs whose *host* confuses ``urlsplit`` (unbalanced or
misplaced brackets, an IPv4 address in brackets) and ports the guard misread (``:0``).
These strategies build URL strings from parts that are each plausible or
broken on purpose, so most examples get past the first check and reach the
parsers, plus arbitrary text for everything else. No generated host resolves:
names end in ``.invalid`` / ``.example`` or are literals, so nothing leaves the
machine.
"""

from __future__ import annotations

from hypothesis import strategies as st

_SCHEMES = st.sampled_from(["https", "http", "HTTPS", "ftp", "file", "", "https:", "javascript"])
_SEPARATORS = st.sampled_from(["://", ":/", ":", ":///", "://\\", "//"])

_LABEL = st.from_regex(r"[a-z0-9_-]{1,12}", fullmatch=True)
_NAMES = st.builds(
    lambda labels, tld: ".".join([*labels, tld]),
    st.lists(_LABEL, min_size=0, max_size=3),
    st.sampled_from(["invalid", "example", "localhost", "local", "internal", "", "1", "0x7f"]),
)
_V4 = st.ip_addresses(v=4).map(str)
_V6 = st.ip_addresses(v=6).map(str)
_BRACKET_NOISE = st.text(alphabet="0123456789abcdefv.:%[]", max_size=20)
#: Hosts that bracket parsers disagree on or refuse outright.
_MALFORMED_HOSTS = st.one_of(
    _V6.map(lambda a: f"[{a}"),  # unclosed: urlsplit raises "Invalid IPv6 URL"
    _V6.map(lambda a: f"{a}]"),
    _V4.map(lambda a: f"[{a}]"),  # "An IPv4 address cannot be in brackets"
    _BRACKET_NOISE.map(lambda t: f"[{t}]"),
    _BRACKET_NOISE,
    st.builds(lambda a, b: f"{a}[{b}]", _LABEL, _BRACKET_NOISE),
    st.just("[]"),
    st.just("]"),
    st.just("["),
)
_HOSTS = st.one_of(
    _NAMES,
    _V4,
    _V6.map(lambda a: f"[{a}]"),
    _MALFORMED_HOSTS,
    st.text(alphabet="[]:@%.#?/\\ab1", max_size=12),
)
_PORTS = st.one_of(
    st.sampled_from(["", ":", ":0", ":00", ":443", ":0443", ":65535", ":65536", ":-1", ":+1"]),
    st.integers(min_value=-10, max_value=10**7).map(lambda n: f":{n}"),
    st.text(alphabet="0123456789:x ", max_size=8).map(lambda t: f":{t}"),
)
_USERINFO = st.sampled_from(["", "user@", "a:b@", "@", "a@b@"])
_REST = st.sampled_from(["", "/", "/hook", "/hook?x=1", "#frag", "?", "/[", "/%00", "\\x"])

#: Assembled URLs: mostly shaped like a URL, with one part (or several) broken.
composed_urls = st.builds(
    lambda scheme, sep, user, host, port, rest: f"{scheme}{sep}{user}{host}{port}{rest}",
    _SCHEMES,
    _SEPARATORS,
    _USERINFO,
    _HOSTS,
    _PORTS,
    _REST,
)

#: Everything a client might send as a URL string.
hostile_urls = st.one_of(
    composed_urls,
    composed_urls,  # weighted: composed examples find parser edges faster
    st.text(max_size=80),
    st.text(alphabet=st.characters(codec="ascii"), max_size=80),
)

#: ``https`` URLs whose host is malformed on purpose: the class behind issue 16's 500.
malformed_host_urls = st.builds(
    lambda host, port, rest: f"https://{host}{port}{rest}",
    _MALFORMED_HOSTS,
    _PORTS,
    _REST,
)

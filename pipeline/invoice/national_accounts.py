"""A national payee account (EN 16931 BT-84 that is no IBAN) and its canonical form.

A Swedish Peppol invoice names where to pay by a bankgiro or plusgiro number, the
scheme in UBL's ``PayeeFinancialAccount/FinancialInstitutionBranch/ID``
(``SE:BANKGIRO``, ``SE:PLUSGIRO``) or the ID's ``schemeID``. The supplier register holds
such accounts (``fenceline suppliers add ... --account SE:BANKGIRO:5050-1055``) in the
form validation compares them in, :func:`canonical_account`:

* the **scheme** upper case: a country code, a colon and a name of letters, digits or
  underscores (``SE:BANKGIRO``), as Peppol names them;
* the **id** upper case with every space and hyphen dropped (``5050-1055`` is
  ``50501055``), letters and digits only;
* written ``SCHEME:ID`` (``SE:BANKGIRO:50501055``): the id is what follows the last colon.

An account whose scheme is none or not of that shape (a bank's BIC, a payment means code)
names nothing the register can hold: :func:`national_account` returns None for it, and
the reader reviews it as before (``payee_account_not_iban``).
"""

from __future__ import annotations

import re
import unicodedata

#: A scheme the register can hold: country, colon, name (``SE:BANKGIRO``).
_SCHEME = re.compile(r"[A-Z]{2}:[A-Z0-9_]{2,35}")
#: An account id once spaces and hyphens are dropped.
_ID = re.compile(r"[A-Z0-9]{2,34}")
_DROPPED = re.compile(r"[\s\-]")


def canonical_scheme(value: str) -> str | None:
    """``value`` (NFKC, trimmed, upper case) if it is a scheme of the register's shape."""
    scheme = unicodedata.normalize("NFKC", value).strip().upper()
    return scheme if _SCHEME.fullmatch(scheme) else None


def canonical_id(value: str) -> str | None:
    """``value`` (NFKC, upper case, spaces and hyphens dropped) if letters and digits only."""
    ident = _DROPPED.sub("", unicodedata.normalize("NFKC", value)).upper()
    return ident if _ID.fullmatch(ident) else None


def national_account(scheme: str | None, ident: str) -> str | None:
    """The canonical ``SCHEME:ID`` of an account stated with ``scheme``; None where the
    scheme is missing or of no shape the register holds, or the id is no account id."""
    if scheme is None:
        return None
    s, i = canonical_scheme(scheme), canonical_id(ident)
    return f"{s}:{i}" if s is not None and i is not None else None


def parse_account(value: str) -> str:
    """An operator's ``SCHEME:ID`` (``SE:BANKGIRO:5050-1055``) in canonical form.

    Raises:
        ValueError: no colon, or a scheme or id of no shape the register holds.
    """
    scheme, sep, ident = value.strip().rpartition(":")
    if not sep or not scheme:
        raise ValueError(
            f"{value!r} is not SCHEME:ID (a national account such as SE:BANKGIRO:5050-1055)"
        )
    if canonical_scheme(scheme) is None:
        raise ValueError(
            f"{value!r}: the scheme {scheme!r} is not a country code, a colon and a name "
            "(SE:BANKGIRO, SE:PLUSGIRO)"
        )
    canonical = national_account(scheme, ident)
    if canonical is None:
        raise ValueError(
            f"{value!r}: the account id {ident!r} is not 2-34 letters or digits "
            "(spaces and hyphens aside)"
        )
    return canonical

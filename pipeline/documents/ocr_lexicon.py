"""The words tesseract's languages know, to tell whether OCR may have lost an accent.

Tesseract reads "Equerre" for a printed "Équerre" and "Konsulttjanster" for
"Konsulttjänster" with high confidence: the accent is a few pixels that blur takes.
Its confidence cannot show that, but its word lists can: a word read without an accent
whose letters, accents aside, are also a listed word with one ("cafe" / "café") may
have lost it, and a word no list holds cannot be told apart from its accented twin.

The lists are the ``lstm-word-dawg`` of each ``.traineddata`` (Debian's
``tesseract-ocr`` ships ``combine_tessdata`` and ``dawg2wordlist``). They are read once
per process and kept as sorted 64-bit hashes of their case-folded words (about 16
MiB for the ten default languages; a hash collision can only call an unknown word
known, about one in 10^12 per word).
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import tempfile
import unicodedata
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from pathlib import Path

#: Letters that NFD does not split into a base and a mark.
_FOLD = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ð": "d", "þ": "th", "ı": "i"})
_PAIRS = (("æ", "ae"), ("œ", "oe"), ("ß", "ss"))


def strip_accents(word: str) -> str:
    """``word`` case-folded, its diacritics dropped (``Équerre`` → ``equerre``)."""
    nfd = unicodedata.normalize("NFD", word.casefold().translate(_FOLD))
    base = "".join(ch for ch in nfd if not unicodedata.combining(ch))
    for pair, repl in _PAIRS:
        base = base.replace(pair, repl)
    return unicodedata.normalize("NFC", base)


def _key(word: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(word.encode(), digest_size=8).digest(), "big", signed=True
    )


def _sorted(keys: Iterable[int]) -> array[int]:
    return array("q", sorted(set(keys)))


def _has(keys: array[int], key: int) -> bool:
    i = bisect_left(keys, key)
    return i < len(keys) and keys[i] == key


#: Combining classes of marks drawn above a letter (230: acute, grave, circumflex,
#: tilde, diaeresis, ring, caron, dot, double acute, breve, macron; 232-234 above
#: right or doubled) and below it (202: cedilla and ogonek attached; 220: below).
_ABOVE_CLASSES = frozenset({230, 232, 233, 234})
_BELOW_CLASSES = frozenset({202, 220})
#: A twin mask's bit for a difference no band of ink can show (a stroke: ``ł``, ``ø``;
#: a ligature: ``æ``, ``ß``; a position past the mask's 30).
OTHER = 1 << 62
_MAX_POSITION = 30


def mark_mask(form: str, base: str) -> int:
    """Where and how ``form`` (case-folded) differs from ``base`` (its stripped form):
    bit ``2p`` a mark above position ``p`` of ``base``, bit ``2p + 1`` one below,
    :data:`OTHER` any difference neither shows."""
    mask = 0
    at = 0
    for ch in form:
        bare = strip_accents(ch)
        if bare == ch:
            at += len(ch)
            continue
        marks = unicodedata.normalize("NFD", ch)[1:]
        if len(bare) != 1 or not marks or at >= _MAX_POSITION:
            mask |= OTHER
        for mark in marks:
            kind = unicodedata.combining(mark)
            if kind in _ABOVE_CLASSES and at < _MAX_POSITION:
                mask |= 1 << (2 * at)
            elif kind in _BELOW_CLASSES and at < _MAX_POSITION:
                mask |= 1 << (2 * at + 1)
            else:
                mask |= OTHER
        at += len(bare)
    if at != len(base):
        mask |= OTHER
    return mask


class _Words:
    """One language's case-folded words, and which an accent could be missing from
    (and where on them its twins carry marks)."""

    def __init__(self, words: Iterable[str]) -> None:
        forms: dict[str, set[str]] = {}
        for word in words:
            folded = unicodedata.normalize("NFC", word.strip().casefold())
            if folded:
                forms.setdefault(strip_accents(folded), set()).add(folded)
        self.known = _sorted(_key(f) for group in forms.values() for f in group)
        # stripped forms spelled more than one way, or only with an accent
        masks: dict[int, int] = {}
        for base, group in forms.items():
            if len(group) > 1 or base not in group:
                mask = 0
                for form in group:
                    if form != base:
                        mask |= mark_mask(form, base)
                key = _key(base)
                masks[key] = masks.get(key, 0) | mask
        self.twinned = array("q", sorted(masks))
        self.masks = array("q", (masks[k] for k in self.twinned))


class OcrLexicon:
    """The word lists of a few languages, each on its own: an accent twin is looked
    for in the document's language only (English "and" is no twin of Danish "ånd")."""

    def __init__(self, languages: Mapping[str, Iterable[str]]) -> None:
        self._languages = {name: _Words(words) for name, words in languages.items()}

    def language_of(self, words: Iterable[str]) -> str | None:
        """The language that knows most of ``words``; None without a language."""
        keys = [_key(unicodedata.normalize("NFC", w.casefold())) for w in words]
        best = max(
            self._languages.items(),
            key=lambda item: sum(_has(item[1].known, k) for k in keys),
            default=None,
        )
        return best[0] if best is not None else None

    def knows(self, word: str, language: str) -> bool:
        """``language`` lists ``word`` (case aside)."""
        lang = self._languages.get(language)
        folded = unicodedata.normalize("NFC", word.casefold())
        return lang is not None and _has(lang.known, _key(folded))

    def certain(self, word: str, language: str) -> bool:
        """``language`` lists ``word`` and no word of it differs from it by accents alone."""
        lang = self._languages.get(language)
        if lang is None:
            return False
        folded = unicodedata.normalize("NFC", word.casefold())
        return _has(lang.known, _key(folded)) and not _has(
            lang.twinned, _key(strip_accents(folded))
        )

    def twin_mask(self, word: str, language: str) -> int | None:
        """Where ``language``'s words spelled like ``word`` but for accents carry them
        (:func:`mark_mask`, all twins together); None where no such word is listed."""
        lang = self._languages.get(language)
        if lang is None:
            return None
        key = _key(strip_accents(unicodedata.normalize("NFC", word.casefold())))
        i = bisect_left(lang.twinned, key)
        if i < len(lang.twinned) and lang.twinned[i] == key:
            return lang.masks[i]
        return None


def _word_list(binary: str, traineddata: Path, workdir: Path) -> list[str]:
    tools = Path(binary).parent
    combine = shutil.which("combine_tessdata", path=str(tools)) or shutil.which("combine_tessdata")
    dawg2 = shutil.which("dawg2wordlist", path=str(tools)) or shutil.which("dawg2wordlist")
    if combine is None or dawg2 is None:
        raise FileNotFoundError("combine_tessdata or dawg2wordlist")
    prefix = workdir / traineddata.stem
    subprocess.run(
        [combine, "-u", str(traineddata), f"{prefix}."], check=True, capture_output=True, timeout=60
    )
    out = workdir / f"{traineddata.stem}.words"
    subprocess.run(
        [dawg2, f"{prefix}.lstm-unicharset", f"{prefix}.lstm-word-dawg", str(out)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return out.read_text(encoding="utf-8", errors="replace").splitlines()


def _tessdata(binary: str) -> Path:
    """The folder ``binary`` reads its traineddata from (``--list-langs``' first line)."""
    done = subprocess.run(
        [binary, "--list-langs"], capture_output=True, timeout=30, check=True, text=True
    )
    first = (done.stdout.splitlines() or [""])[0]
    if first.count('"') < 2:
        raise FileNotFoundError(f"no tessdata folder in {first!r}")
    return Path(first.split('"')[1])


@functools.lru_cache(maxsize=4)
def ocr_lexicon(binary: str, languages: str) -> OcrLexicon | None:
    """The word lists of ``languages`` (``+``-joined, those installed) that ``binary``
    reads; None where the tools or every language's data are missing (no word can
    then be proven)."""
    lists: dict[str, list[str]] = {}
    try:
        tessdata = _tessdata(binary)
        with tempfile.TemporaryDirectory(prefix="fenceline-lexicon-") as tmp:
            for language in languages.split("+"):
                data = tessdata / f"{language}.traineddata"
                if data.is_file():
                    lists[language] = _word_list(binary, data, Path(tmp))
    except (OSError, subprocess.SubprocessError):
        return None
    return OcrLexicon(lists) if lists else None

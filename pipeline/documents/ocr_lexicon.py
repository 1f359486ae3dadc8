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


class _Words:
    """One language's case-folded words, and which an accent could be missing from."""

    def __init__(self, words: Iterable[str]) -> None:
        forms: dict[str, set[str]] = {}
        for word in words:
            folded = unicodedata.normalize("NFC", word.strip().casefold())
            if folded:
                forms.setdefault(strip_accents(folded), set()).add(folded)
        self.known = _sorted(_key(f) for group in forms.values() for f in group)
        # stripped forms spelled more than one way, or only with an accent
        self.twinned = _sorted(
            _key(base) for base, group in forms.items() if len(group) > 1 or base not in group
        )


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

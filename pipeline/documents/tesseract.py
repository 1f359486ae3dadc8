"""The tesseract binary as a subprocess: one page image in, its TSV out.

Tesseract runs as a child process, never through a shell: an explicit argv, the PNG on
stdin, the TSV on stdout, ``OMP_THREAD_LIMIT=1`` (one page, one core; parallelism is
more pages, not more threads per page) and a wall-clock limit per page after which the
child is killed. Debian's ``tesseract-ocr`` and its language packs are installed by
``make ocr-tools``.

Invariants:

* Orientation (quarter turns) comes from tesseract's own detection (``--psm 0``,
  Debian's ``tesseract-ocr-osd``) where that data is installed.
* A missing binary, or a configuration none of whose languages is installed, is
  :class:`~pipeline.errors.OcrUnavailable` (retryable, names ``make ocr-tools``);
  a page past the limit is :class:`~pipeline.errors.OcrPageTimeout` (terminal); an
  image tesseract cannot read is ``unreadable_document``. Nothing else escapes.
* The languages passed are the configured ones that are installed, in the configured
  order (the first is tesseract's primary language).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile

from pipeline.errors import DocumentRefused, OcrPageTimeout, OcrUnavailable

_INSTALL = "install Debian's tesseract-ocr and its language packs with `make ocr-tools`"
#: Page segmentation: 6, the page as one block of rows. Its automatic layout analysis
#: (3) cut an invoice's table into blocks and read a column of ``%`` signs as
#: vertical text (``dP``, one a row), and the rows' right-aligned amounts lost their
#: decimals; our own layout (:mod:`pipeline.documents.grid`) keeps the columns from
#: the words' boxes. On generated scans of seeds 5000–5029 the printed words read
#: right went from 88 % to 94 %.
PAGE_SEGMENTATION = 6
#: Below this orientation confidence (tesseract's OSD: 11–14 on a full invoice page,
#: 1.4–4.3 on two to five lines, where it was still right) a detected quarter turn is
#: not trusted and the page stays as it is: a wrong turn loses the whole page.
MIN_ORIENTATION_CONFIDENCE = 3.0


@functools.cache
def installed_languages(binary: str) -> frozenset[str]:
    """The traineddata ``binary`` finds (``tesseract --list-langs``), cached per binary.

    Raises:
        OcrUnavailable: no such binary, or it does not answer.
    """
    try:
        done = subprocess.run(
            [binary, "--list-langs"], capture_output=True, timeout=30, check=False, text=True
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OcrUnavailable(f"cannot run {binary!r} ({exc}); {_INSTALL}") from exc
    if done.returncode != 0:
        raise OcrUnavailable(f"{binary} --list-langs failed: {done.stderr.strip()}; {_INSTALL}")
    # The first line is "List of available languages in ...", the rest one name each.
    return frozenset(line.strip() for line in done.stdout.splitlines()[1:] if line.strip())


#: A tesseract language as its traineddata names it (``deu``, ``chi_sim``, ``deu_latf``).
_LANGUAGE = re.compile(r"^[a-z]{3}(_[a-z]{3,4})?$")
#: More languages than this on one page only slow tesseract down and blur its guesses.
MAX_REQUESTED_LANGUAGES = 8


def requested_languages(value: object) -> tuple[str, ...]:
    """A job's ``ocr_languages`` option as language names, in the order given.

    ``value`` is ``+``-joined text (``"deu+fra"``, as tesseract writes it) or a list of
    names; repeats are dropped, the first stays tesseract's primary language.

    Raises:
        ValueError: not text or a list of text, empty, more than
            :data:`MAX_REQUESTED_LANGUAGES`, or a name that is no tesseract language.
    """
    if isinstance(value, str):
        names = value.split("+")
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = list(value)
    else:
        raise ValueError("ocr_languages must be '+'-joined text or a list of language names")
    if len(names) > MAX_REQUESTED_LANGUAGES:
        raise ValueError(f"ocr_languages names more than {MAX_REQUESTED_LANGUAGES} languages")
    out = tuple(dict.fromkeys(names))
    if not out or out == ("",):
        raise ValueError("ocr_languages names no language")
    bad = [n for n in out if not _LANGUAGE.fullmatch(n) or n == "osd"]
    if bad:
        shown = ", ".join(repr(n[:16]) for n in bad[:4])
        raise ValueError(f"ocr_languages holds what is no tesseract language name: {shown}")
    return out


def choose_languages(configured: str, installed: frozenset[str]) -> str:
    """The ``+``-joined languages to pass: the configured ones that are installed.

    Raises:
        OcrUnavailable: none of them is installed.
    """
    chosen = [lang for lang in configured.split("+") if lang and lang in installed]
    if not chosen:
        raise OcrUnavailable(f"none of the OCR languages {configured!r} is installed; {_INSTALL}")
    return "+".join(chosen)


def run_tesseract(
    png: bytes, *, binary: str, languages: str, dpi: int, seconds: float, page: int
) -> str:
    """Recognise one page image and return tesseract's TSV.

    Args:
        png: the page as PNG bytes (grayscale, already normalised).
        binary: the tesseract binary (``Settings.ocr_tesseract``).
        languages: ``+``-joined, each installed (:func:`choose_languages`).
        dpi: the image's resolution, passed on so tesseract's size heuristics hold.
        seconds: the wall-clock limit (``Settings.ocr_page_seconds``).
        page: the page's number, for the errors.

    Raises:
        OcrUnavailable: the binary is missing.
        OcrPageTimeout: tesseract ran past ``seconds`` (it is killed).
        DocumentRefused: ``unreadable_document``, tesseract could not read the image.
    """
    argv = _argv(binary, "stdout", languages, dpi, "tsv")
    done = _checked(_run(argv, png, binary=binary, seconds=seconds, page=page), page)
    return done.stdout.decode("utf-8", "replace")


def _argv(binary: str, output: str, languages: str, dpi: int, *configs: str) -> list[str]:
    """tesseract's command line: the image from stdin, ``output`` (stdout or a file
    base), the page segmentation and resolution, then ``configs``."""
    segmentation = ["--psm", str(PAGE_SEGMENTATION), "--dpi", str(dpi)]
    return [binary, "stdin", output, "-l", languages, *segmentation, *configs]


def _checked(
    done: subprocess.CompletedProcess[bytes], page: int
) -> subprocess.CompletedProcess[bytes]:
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[-500:]
        raise DocumentRefused("unreadable_document", f"tesseract, page {page}: {detail}")
    return done


def read_page(
    png: bytes, *, binary: str, languages: str, dpi: int, seconds: float, page: int
) -> tuple[str, str]:
    """Recognise one page image and return tesseract's TSV and its hOCR with character
    boxes (``hocr_char_boxes=1``), both written by the one run.

    Arguments and errors as :func:`run_tesseract`.
    """
    with tempfile.TemporaryDirectory(prefix="fenceline-ocr-") as folder:
        base = os.path.join(folder, "page")
        argv = _argv(binary, base, languages, dpi, "-c", "hocr_char_boxes=1", "tsv", "hocr")
        _checked(_run(argv, png, binary=binary, seconds=seconds, page=page), page)
        try:
            with open(f"{base}.tsv", encoding="utf-8", errors="replace") as tsv:
                text = tsv.read()
            with open(f"{base}.hocr", encoding="utf-8", errors="replace") as hocr:
                boxes = hocr.read()
        except OSError as exc:
            raise DocumentRefused(
                "unreadable_document", f"tesseract, page {page}: no output ({exc})"
            ) from exc
    return text, boxes


def detect_rotation(png: bytes, *, binary: str, dpi: int, seconds: float, page: int) -> int:
    """The clockwise quarter turn (0, 90, 180 or 270 degrees) that makes the page upright,
    by tesseract's orientation and script detection (``--psm 0``, the ``osd`` data).

    0 where it cannot tell: too few characters (tesseract then exits with an error) or
    an orientation confidence under :data:`MIN_ORIENTATION_CONFIDENCE`.

    Raises:
        OcrUnavailable: the binary is missing.
        OcrPageTimeout: it ran past ``seconds``.
    """
    argv = [binary, "stdin", "stdout", "--psm", "0", "--dpi", str(dpi)]
    done = _run(argv, png, binary=binary, seconds=seconds, page=page)
    if done.returncode != 0:
        return 0
    fields = {}
    for row in done.stdout.decode("utf-8", "replace").splitlines():
        name, _, value = row.partition(":")
        fields[name.strip()] = value.strip()
    try:
        rotate = int(fields.get("Rotate", "0"))
        confidence = float(fields.get("Orientation confidence", "0"))
    except ValueError:
        return 0
    if confidence < MIN_ORIENTATION_CONFIDENCE or rotate not in (90, 180, 270):
        return 0
    return rotate


def _run(
    argv: list[str], png: bytes, *, binary: str, seconds: float, page: int
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        return subprocess.run(
            argv, input=png, capture_output=True, timeout=seconds, check=False, env=env
        )
    except subprocess.TimeoutExpired as exc:  # run() has killed and reaped the child
        raise OcrPageTimeout(page, seconds=seconds) from exc
    except OSError as exc:
        raise OcrUnavailable(f"cannot run {binary!r} ({exc}); {_INSTALL}") from exc

"""The corpus's files, read from a bare git directory (a mirror) or from a folder.

A mirror is read with ``git ls-tree``/``git cat-file`` at ``HEAD``: nothing is checked
out, and the files read are the commit's, byte for byte.

Only the documents the corpus calls valid are taken: PDFs under a ``correct`` folder
(``ZUGFeRDv1/correct``, ``ZUGFeRDv2/correct``) and the Factur-X samples of
``XML-Rechnung/FX``. The ``fail`` folders hold invoices with deliberate errors.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def is_corpus_document(path: str) -> bool:
    """A PDF the corpus calls valid (see the module docstring)."""
    parts = path.split("/")
    if not path.lower().endswith(".pdf"):
        return False
    return "correct" in parts[:-1] or parts[:2] == ["XML-Rechnung", "FX"]


@dataclass(frozen=True)
class CorpusTree:
    """A snapshot of the corpus: a bare git directory or a plain folder."""

    root: Path

    @property
    def is_git(self) -> bool:
        return (self.root / "HEAD").is_file() and (self.root / "objects").is_dir()

    def _git(self, *args: str) -> bytes:
        return subprocess.run(
            ["git", f"--git-dir={self.root}", *args], check=True, capture_output=True
        ).stdout

    def paths(self) -> list[str]:
        """Every file path in the snapshot, ``/``-separated, sorted."""
        if self.is_git:
            out = self._git("ls-tree", "-r", "-z", "--name-only", "HEAD")
            return sorted(p for p in out.decode("utf-8").split("\0") if p)
        return sorted(
            p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()
        )

    def documents(self) -> list[str]:
        return [p for p in self.paths() if is_corpus_document(p)]

    def read(self, path: str) -> bytes:
        if self.is_git:
            return self._git("cat-file", "blob", f"HEAD:{path}")
        return (self.root / path).read_bytes()

    def commit(self) -> str | None:
        """The snapshot's commit (``None`` for a folder)."""
        return self._git("rev-parse", "HEAD").decode().strip() if self.is_git else None

"""The one process-wide lock every call into PDFium holds.

PDFium is not thread-safe: two threads inside it at once (reading one PDF's text
layer while rendering another's page) can corrupt its state. Every module here that
calls pypdfium2 holds this lock for the whole of its use of a document; parallel
reading needs processes.
"""

from __future__ import annotations

import threading

PDFIUM_LOCK = threading.Lock()

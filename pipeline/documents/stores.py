"""Which document store a deployment uses, from its settings.

``document_store`` unset: the embedded default, a content-addressed folder under the
state folder (``FENCELINE_STATE_DIR``, ``.fenceline`` by default), which needs no
service and suits one machine. ``s3://bucket/prefix``: the S3 API, for every
deployment with more than one machine.
"""

from __future__ import annotations

from pipeline.documents.folder_store import FolderStore
from pipeline.documents.s3_store import S3Store
from pipeline.documents.store import DocumentStore
from pipeline.settings import Settings


def open_document_store(settings: Settings) -> DocumentStore:
    """The store ``settings`` name; nothing is contacted until the first call.

    Raises:
        ValueError: ``document_store`` is neither unset nor an ``s3://`` URL.
    """
    url = settings.document_store
    if not url:
        return FolderStore(settings.state_dir / "documents")
    if url.startswith("s3://"):
        return S3Store.from_url(
            url,
            endpoint_url=settings.document_store_endpoint_url,
            region=settings.document_store_region,
        )
    raise ValueError(f"FENCELINE_DOCUMENT_STORE must be unset or s3://bucket/prefix: {url!r}")

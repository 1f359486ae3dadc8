"""A real S3-protocol server on loopback: moto's server mode, as its own process.

The S3 store is tested over HTTP against it, the way it talks to AWS or MinIO; no
client internals are patched. Credentials reach boto through its ordinary chain
(the environment), as in production.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import httpx

#: The environment boto's credential chain reads in these tests (moto accepts any keys).
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "fenceline-test",
    "AWS_SECRET_ACCESS_KEY": "fenceline-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_CONFIG_FILE": os.devnull,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def moto_server(start_timeout: float = 90.0) -> Iterator[str]:
    """Start ``python -m moto.server`` on a free loopback port; yield its endpoint URL
    once it answers; stop it (and fail, with its output, if it never answered)."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **CREDENTIALS},
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if process.poll() is not None:
                output = process.stdout.read().decode() if process.stdout else ""
                raise RuntimeError(f"moto server exited with {process.returncode}: {output}")
            try:
                if httpx.get(f"{endpoint}/moto-api/", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto server did not answer on {endpoint} in time")
            time.sleep(0.2)
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()


def s3_client(endpoint: str) -> Any:
    """A plain boto3 client for test setup (buckets, writes behind the store's back)."""
    return boto3.session.Session(
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
    ).client("s3", endpoint_url=endpoint)

"""Two `amsrag serve` processes on one PostgreSQL database: both answer, each sees the other's ingests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = pytest.mark.slow

KEY = "two-servers-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(url: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "amsrag.cli", "serve", "--index", url, "--port", str(port)],
                            env={**os.environ, "AMSRAG_API_KEYS": KEY}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None, proc.stderr.read()
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "amsrag serve did not start"
        time.sleep(0.3)


def test_two_servers_share_one_database(pg_url, built_index) -> None:
    from amsrag.store.open import export_index

    export_index(built_index, pg_url)
    a, url_a = _start(pg_url)
    try:
        b, url_b = _start(pg_url)
        try:
            for url in (url_a, url_b):
                r = httpx.post(f"{url}/v1/retrieve", json={"query": "Tinted Windows debut album"}, headers=AUTH,
                               timeout=120)
                assert r.status_code == 200 and r.json()["passages"], r.text
            doc = {"id": "shared-db-1", "title": "Quillmoor Observatory",
                   "text": "The Quillmoor Observatory was founded in 1911 by the astronomer Edda Varnholt."}
            r = httpx.post(f"{url_a}/v1/documents", json={"passages": [doc]}, headers=AUTH, timeout=120)
            assert r.status_code == 200, r.text
            got = httpx.get(f"{url_b}/v1/documents/shared-db-1", headers=AUTH, timeout=60)
            assert got.status_code == 200 and got.json()["title"] == "Quillmoor Observatory"
            found = httpx.post(f"{url_b}/v1/retrieve", headers=AUTH, timeout=120,
                               json={"query": "Quillmoor Observatory founder", "system": "bm25"}).json()
            assert found["passages"][0]["id"] == "shared-db-1"
            assert httpx.delete(f"{url_b}/v1/documents/shared-db-1", headers=AUTH, timeout=120).status_code == 200
            gone = httpx.get(f"{url_a}/v1/documents/shared-db-1", headers=AUTH, timeout=60)
            assert gone.status_code == 404
        finally:
            b.terminate()
            b.wait(timeout=30)
    finally:
        a.terminate()
        a.wait(timeout=30)

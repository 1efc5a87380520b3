"""Run the app on a free loopback port in a background thread (tests, notebooks, embedding in a program)."""

from __future__ import annotations

import threading
import time

import uvicorn
from fastapi import FastAPI


class BackgroundServer:
    """`with BackgroundServer(app) as url: ...` — a real uvicorn server; `url` is `http://127.0.0.1:PORT`."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 120.0) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                                    access_log=False, lifespan="on"))
        self.host = host
        self.start_timeout_s = start_timeout_s
        self._thread = threading.Thread(target=self.server.run, name="amsrag-background-server", daemon=True)
        self.url = ""

    def start(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server thread ended before it started (see the log above)")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the server did not start within {self.start_timeout_s:g} s")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{port}"
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=15)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

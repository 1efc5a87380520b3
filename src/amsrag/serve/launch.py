"""`amsrag serve`: settle the configuration, refuse unsafe setups, warm the engine, run uvicorn."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from amsrag.access.settings import serve_config
from amsrag.config import AmsragConfig
from amsrag.errors import InputError
from amsrag.serve.discovery import remove_discovery, write_discovery
from amsrag.serve.sources import SourceRoots


def served_roots(sources: Sequence[str], watch: Sequence[str] = ()) -> SourceRoots:
    """The folders whose files the service serves: every `--sources` folder (a missing one, or a file, is an
    InputError) and every `--watch` folder that can be served (one named with a '/' is not, and is logged)."""
    roots = dict(SourceRoots.parse(sources).roots)
    for spec in watch:
        try:
            extra = SourceRoots.parse([*sources, spec]).roots
        except InputError as exc:
            logging.getLogger("amsrag.serve").warning("the watched folder %s is not served: %s", spec, exc)
            continue
        roots.update(extra)
    return SourceRoots(roots)


def log_to_stderr() -> None:
    """amsrag's own log lines (warm-up, index reloads, background jobs' progress) on stderr beside uvicorn's,
    unless the application configured logging itself."""
    logger = logging.getLogger("amsrag")
    if logger.handlers or logging.getLogger().handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def run(index_dir: str | Path, host: str | None = None, port: int | None = None, config_file: Path | None = None,
        access_log: bool = False, query_log: bool | None = None, review: bool | None = None,
        shadow: bool | None = None, watch: Sequence[str] = (), sources: Sequence[str] = ()) -> None:
    """`config_file`: a TOML whose [serve], [query_log], [review] and [shadow] sections replace the index's;
    `query_log`, `review`, `shadow`: turn the query log, the review queue, the shadow probes on or off whatever
    the configuration says; `watch`: folders (PATH or NAME=PATH) kept in step with the index while it serves
    (`index sync --watch` on a thread; the service reloads each generation it publishes); `sources`: folders
    (PATH or NAME=PATH) whose files `GET /v1/sources/NAME/PATH` serves read-only (the watched ones too)."""
    import uvicorn

    from amsrag.indexing.watch import FolderWatcher, require_watchfiles

    if watch:
        require_watchfiles()  # before the engine loads: the missing extra is the first thing said

    served = served_roots(sources, watch)  # a missing folder is refused before the engine loads

    from amsrag.pipeline import Engine
    from amsrag.serve.app import create_app
    from amsrag.serve.service import Service

    engine = Engine.open(index_dir)
    try:
        settings = AmsragConfig.load(config_file) if config_file else engine.config
        cfg = serve_config(settings.serve, host, port)
        log_config = settings.query_log
        if query_log is not None:
            log_config = log_config.model_copy(update={"enabled": query_log})
        review_config = settings.review
        if review is not None:
            review_config = review_config.model_copy(update={"enabled": review})
        shadow_config = settings.shadow
        if shadow is not None:
            shadow_config = shadow_config.model_copy(update={"enabled": shadow})
        log_to_stderr()
        service = Service(engine, cfg, log_config=log_config, review_config=review_config, shadow=shadow_config,
                          sources=served)
    except BaseException:
        engine.close()
        raise
    app = create_app(service)
    watcher = FolderWatcher(index_dir, watch) if watch else None
    # `amsrag ask` on this index finds the service through this file (an index directory, a fixed port)
    announced = write_discovery(Path(index_dir), cfg.host, cfg.port) if cfg.port and Path(index_dir).is_dir() else None
    try:
        if watcher is not None:
            watcher.start()
        uvicorn.run(app, host=cfg.host, port=cfg.port, access_log=access_log, log_level="info",
                    timeout_keep_alive=30, timeout_graceful_shutdown=10)
    finally:
        if watcher is not None:
            watcher.stop()
        if announced is not None:
            remove_discovery(announced)
        service.close()

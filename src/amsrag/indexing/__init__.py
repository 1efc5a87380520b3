"""Index maintenance jobs over input files: streaming batched ingest whose embedding resumes after a
kill (`ingest_inputs`), and folder sync (`sync_folders`). The names below are imported on first use
(`amsrag.lazy`)."""

from typing import TYPE_CHECKING

from amsrag.lazy import lazy_exports

if TYPE_CHECKING:
    from amsrag.indexing.job import JobReport, ingest_inputs
    from amsrag.indexing.sync import sync_folders

__all__ = ["JobReport", "ingest_inputs", "sync_folders"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "JobReport": "amsrag.indexing.job", "ingest_inputs": "amsrag.indexing.job",
    "sync_folders": "amsrag.indexing.sync"})

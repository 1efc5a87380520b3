"""Index maintenance jobs over input files: streaming batched ingest whose embedding resumes after a
kill (`ingest_inputs`), and folder sync (`sync_folders`)."""

from amsrag.indexing.job import JobReport, ingest_inputs
from amsrag.indexing.sync import sync_folders

__all__ = ["JobReport", "ingest_inputs", "sync_folders"]

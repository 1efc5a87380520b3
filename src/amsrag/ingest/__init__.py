"""Ingestion: detect input formats, load QA data sets, read and chunk passages for an index.

Formats: jsonl, text, markdown (passage inputs); hotpotqa, musique, nq, squad, flashrag,
questions, qa-jsonl, retrievalqa, corpus (data sets). See `FORMAT_DESCRIPTIONS`. The names below are
imported on first use (`amsrag.lazy`)."""

from typing import TYPE_CHECKING

from amsrag.lazy import lazy_exports

if TYPE_CHECKING:
    from amsrag.ingest.api import iter_passages, load_qa
    from amsrag.ingest.chunking import chunk_text
    from amsrag.ingest.dataset_facts import DATASET_COMPLEXITY, dataset_from_name
    from amsrag.ingest.formats import (
        DATASET_FORMATS,
        FORMAT_DESCRIPTIONS,
        FORMATS,
        PASSAGE_FORMATS,
        check_format,
        detect_format,
    )
    from amsrag.ingest.qa_records import answers_of

__all__ = [
    "DATASET_COMPLEXITY",
    "DATASET_FORMATS",
    "FORMATS",
    "FORMAT_DESCRIPTIONS",
    "PASSAGE_FORMATS",

    "answers_of",
    "check_format",
    "chunk_text",
    "dataset_from_name",
    "detect_format",
    "iter_passages",
    "load_qa",
]
__getattr__, __dir__ = lazy_exports(__name__, {
    "iter_passages": "amsrag.ingest.api", "load_qa": "amsrag.ingest.api", "chunk_text": "amsrag.ingest.chunking",
    "DATASET_COMPLEXITY": "amsrag.ingest.dataset_facts", "answers_of": "amsrag.ingest.qa_records",
    "dataset_from_name": "amsrag.ingest.dataset_facts", "DATASET_FORMATS": "amsrag.ingest.formats",
    "FORMAT_DESCRIPTIONS": "amsrag.ingest.formats", "FORMATS": "amsrag.ingest.formats",
    "PASSAGE_FORMATS": "amsrag.ingest.formats", "check_format": "amsrag.ingest.formats",
    "detect_format": "amsrag.ingest.formats",
})

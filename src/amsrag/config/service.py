"""The sections of running a service and watching it: `amsrag serve`, the query log, the citation audit, the
monitoring signals, the review queue and the shadow probes."""

from __future__ import annotations

from pydantic import Field, model_validator

from amsrag.config.base import Section


class ServeConfig(Section):
    """`amsrag serve`: address, API keys and request limits (keys also from $AMSRAG_API_KEYS, comma-separated)."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    api_keys: list[str] = Field(default_factory=list, description="empty: no auth (allowed only on loopback)")
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024, description="request body limit (413 above)")
    max_question_chars: int = Field(2000, ge=1, description="longer questions are refused (422)")
    max_k: int = Field(100, ge=1, description="largest k a client may ask for")
    max_passages_per_request: int = Field(10_000, ge=1)
    job_threshold: int = Field(64, ge=1, description="document batches larger than this run as a background job")
    max_running: int = Field(4, ge=1, le=256, description="engine calls running at once")
    max_queued: int = Field(64, ge=0, description="engine calls waiting for a slot; beyond running + queued: 429")
    request_timeout_s: float = Field(60.0, gt=0, description="queueing + running budget per request (504 past it)")
    cors_origins: list[str] = Field(default_factory=list, description="allowed CORS origins; empty: CORS off")
    allowed_hosts: list[str] = Field(
        default_factory=list, description="Host header names served (others: 400 host_not_allowed, so DNS "
        "rebinding cannot reach the service from a browser); empty: the loopback names and `host`, or any name "
        "when API keys are set on a non-loopback address; \"*\": any")


class QueryLogConfig(Section):
    """The query log (opt-in): one row per answered question in `querylog.sqlite` in the index directory,
    or the `amsrag.query_log` table of a PostgreSQL index. API keys, headers and client addresses are never
    stored; known secrets are redacted from the text that is."""

    enabled: bool = Field(False, description="log every answered question (`amsrag serve`, and `amsrag ask`)")
    retention_days: float = Field(
        30.0, ge=0, description="entries older than this are deleted (at most once an hour on append, and by "
        "`amsrag ops querylog prune`); 0 keeps every entry")
    store_answers: bool = Field(True, description="store the answer text (else only its citations and flags)")
    max_query_chars: int = Field(2000, ge=1, description="longer questions are stored cut to this many characters")


class AuditConfig(Section):
    """The citation-support audit after generation (`amsrag.audit`, docs/benchmarks/audit.md): every answer
    of `ask` gets a calibrated P(the cited passages support it) in trace["audit"], and is flagged below the
    threshold."""

    enabled: bool = True
    artifact: str = Field("", description="audit artifact directory; empty = the one shipped in amsrag")
    threshold: float | None = Field(
        None, ge=0, le=1, description="flag an answer whose support is below this; unset = the artifact's, chosen "
        "on its calibration split (`amsrag train audit train`)")
    reader: bool = Field(True, description="read the answer's span probability with the span reader (~20 ms); "
                         "false: the text-only model")


class MonitorConfig(Section):
    """The proxy signals of every answer (`amsrag.audit.signals`, trace["signals"], /metrics) and the monitoring
    over many (`amsrag.monitor`: drift, `amsrag ops monitor report`)."""

    gray_zone_low: float = Field(0.45, ge=0, le=1, description="routing alpha at or above this (and at or below "
                                 "gray_zone_high) is the gray zone, where the classifier is least sure")
    gray_zone_high: float = Field(0.65, ge=0, le=1, description="upper end of the gray zone")
    confident_answer: float = Field(0.70, ge=0, le=1, description="a generator confidence at or above this on an "
                                    "answer the audit flags is an evidence-confidence disagreement")
    unsure_answer: float = Field(0.50, ge=0, le=1, description="an answer given with a generator confidence below "
                                 "this to a question routed as multi_hop is flagged (chosen on the calibration half of "
                                 "docs/benchmarks/misroute-flags.md)")
    drift_window: int = Field(200, ge=20, description="routed answers the drift detector compares with the "
                              "reference (no verdict before the window is full)")
    drift_threshold: float = Field(0.25, gt=0, description="population stability index at which drift alarms "
                                   "(per signal: alpha, route mix, gray-zone share)")

    @model_validator(mode="after")
    def _band(self) -> MonitorConfig:
        if self.gray_zone_low > self.gray_zone_high:
            raise ValueError(f"monitor.gray_zone_low ({self.gray_zone_low}) is above gray_zone_high "
                             f"({self.gray_zone_high})")
        return self


class ReviewConfig(Section):
    """The review queue (opt-in, `amsrag.review`): answers to look at in `review.sqlite` in the index directory;
    the web UI's review page, /v1/review and `amsrag ops review` mark them; the reviews are labelled data."""

    enabled: bool = Field(False, description="queue answers for review (`amsrag serve`; also `--review`)")
    flagged: bool = Field(True, description="queue flagged answers (trace.signals.flagged)")
    suspects: bool = Field(True, description="queue suspects: a cheap route with a sign of a misroute "
                           "(trace.signals.suspect)")
    max_open: int = Field(5000, ge=1, description="open items kept; beyond this the oldest go")
    retention_days: float = Field(90.0, ge=0, description="open and dismissed items older than this are deleted "
                                  "(reviewed ones are labelled data and kept); 0 keeps every item")


class ShadowConfig(Section):
    """Shadow-path probes (`amsrag.monitor.shadow`, docs/benchmarks/shadow.md): after a gray-zone answer is
    returned, the same question runs again on the widest route in the background, and the two answers are
    compared; disagreements are misroute candidates. Off by default (`amsrag serve --shadow`)."""

    enabled: bool = Field(False, description="run shadow probes in `amsrag serve`")
    gray_share: float = Field(1.0, ge=0, le=1, description="share of eligible answers whose routing alpha lies in "
                              "the gray zone ([monitor] gray_zone_low..gray_zone_high) that are probed")
    random_share: float = Field(0.02, ge=0, le=1, description="share of the other eligible answers probed")
    per_minute: int = Field(20, ge=0, description="at most this many probes admitted in any 60 s")
    queue_size: int = Field(16, ge=1, description="probes waiting for an idle server; beyond it they are dropped")
    timeout_s: float = Field(30.0, gt=0, description="a probe still running after this is abandoned (counted)")
    max_wait_s: float = Field(60.0, gt=0, description="a probe that waited this long for an idle server is dropped")
    min_f1: float = Field(0.5, ge=0, le=1, description="answers whose token F1 is below this disagree")
    support_margin: float = Field(0.2, ge=0, le=1, description="the wider path's citation support this much above "
                                  "the answer's is a disagreement too")
    nice: int = Field(10, ge=0, le=19, description="scheduling niceness of the probe thread (Linux); 0: as the server")
    seed: int = Field(0, description="seed of the sampling draws")

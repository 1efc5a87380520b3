"""The review loop (seed 003 §7.3): flagged answers and misroute candidates wait in a durable queue stored
with the index; a reviewer marks each answer right or wrong and gives the question's true class; the
reviews become labelled data (`amsrag train classifier calibrate --reviews`, `amsrag train route learn --reviews`)."""

from amsrag.review.items import (
    KINDS,
    STATUSES,
    TRUE_CLASSES,
    VERDICTS,
    Kind,
    Review,
    ReviewCandidate,
    ReviewItem,
    Status,
    Verdict,
    answer_body,
    candidate_of,
)
from amsrag.review.queue import FILE, ReviewQueue, open_review_queue

__all__ = ["FILE", "KINDS", "STATUSES", "TRUE_CLASSES", "VERDICTS", "Kind", "Review", "ReviewCandidate", "ReviewItem",
           "ReviewQueue", "Status", "Verdict", "answer_body", "candidate_of", "open_review_queue"]

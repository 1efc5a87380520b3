from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from amsrag.topk import topk_indices


@given(st.lists(st.integers(0, 5), min_size=0, max_size=60), st.integers(1, 20))
def test_topk_matches_a_full_sort_with_ties_by_id(values, k) -> None:
    scores = np.asarray(values, dtype=np.float32)
    ids = [f"p{(i * 7919) % 101:03d}-{i}" for i in range(len(values))]
    got = topk_indices(scores, k, ids.__getitem__)
    expected = sorted(range(len(values)), key=lambda i: (-values[i], ids[i]))[:k]
    assert got == expected


def test_min_score_filters() -> None:
    scores = np.asarray([0.0, 1.0, 0.0, 2.0])
    assert topk_indices(scores, 10, str, min_score=0.0) == [3, 1]

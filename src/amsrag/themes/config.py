"""The `[themes]` section: corpus-level themes (k-means over the passage vectors, c-TF-IDF labels)."""

from __future__ import annotations

from pydantic import Field

from amsrag.config import _Section


class ThemeConfig(_Section):
    enabled: bool = True
    k: int = Field(0, ge=0, le=4096, description="number of themes; 0 chooses it (silhouette on a sample)")
    max_k: int = Field(64, ge=2, le=4096, description="upper bound of the automatic choice")
    min_passages: int = Field(40, ge=2, description="below this many passages a corpus has no themes")
    label_terms: int = Field(8, ge=1, le=64, description="c-TF-IDF terms that label a theme")
    representatives: int = Field(3, ge=1, le=64, description="passages closest to a theme's centroid that it cites")
    seed: int = 13
    rebuild_growth: float = Field(
        0.5, gt=0, description="an update flags a rebuild once the corpus grew by this share since the last build"
    )
    drift_tolerance: float = Field(
        0.25, gt=0,
        description="an update flags a rebuild once the added passages' mean cosine distance to their centroids "
        "exceeds the build's by this share",
    )

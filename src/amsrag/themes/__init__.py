"""Corpus-level themes and global search (the aggregation route): k-means themes with c-TF-IDF labels.

`amsrag.indexing.themes` reads the inputs from an index and keeps its themes in step with its passages.
The names below are imported on first use (`amsrag.lazy`)."""

from typing import TYPE_CHECKING

from amsrag.lazy import lazy_exports

if TYPE_CHECKING:
    from amsrag.config import ThemeConfig
    from amsrag.indexes.themes import Theme, Themes, UpdateState
    from amsrag.themes.build import PassageBatch, build_themes, update_themes
    from amsrag.themes.search import (
        GlobalResult,
        SelectedTheme,
        compose_answer,
        global_search,
        looks_global,
        map_reduce,
        map_reduce_prompts,
        read_question,
    )

__all__ = ["GlobalResult", "PassageBatch", "SelectedTheme", "Theme", "ThemeConfig", "Themes", "UpdateState",
           "build_themes", "compose_answer", "global_search", "looks_global", "map_reduce", "map_reduce_prompts",
           "read_question", "update_themes"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "ThemeConfig": "amsrag.config", "PassageBatch": "amsrag.themes.build", "build_themes": "amsrag.themes.build",
    "update_themes": "amsrag.themes.build", "Theme": "amsrag.indexes.themes", "Themes": "amsrag.indexes.themes",
    "UpdateState": "amsrag.indexes.themes", "GlobalResult": "amsrag.themes.search",
    "SelectedTheme": "amsrag.themes.search", "compose_answer": "amsrag.themes.search",
    "global_search": "amsrag.themes.search", "looks_global": "amsrag.themes.search",
    "map_reduce": "amsrag.themes.search", "map_reduce_prompts": "amsrag.themes.search",
    "read_question": "amsrag.themes.search",
})

"""Corpus-level themes and global search (the aggregation route): k-means themes with c-TF-IDF labels.

`amsrag.indexing.themes` reads the inputs from an index and keeps its themes in step with its passages."""

from amsrag.config import ThemeConfig
from amsrag.themes.build import PassageBatch, build_themes, update_themes
from amsrag.themes.model import Theme, Themes, UpdateState
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

"""Corpus-level themes and global search (the aggregation route): k-means themes with c-TF-IDF labels."""

from amsrag.config import ThemeConfig
from amsrag.themes.build import PassageBatch, build_themes, update_themes
from amsrag.themes.model import Theme, Themes, UpdateState

__all__ = ["PassageBatch", "Theme", "ThemeConfig", "Themes", "UpdateState", "build_themes", "update_themes"]

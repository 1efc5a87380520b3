"""The derived data structures an index keeps, below the store that persists them (issue 41).

`themes.py` is the corpus-themes model (`Themes`, its files and arrays), `theme_terms.py` the c-TF-IDF terms it
labels themes with; building and searching themes stay in `amsrag.themes`."""

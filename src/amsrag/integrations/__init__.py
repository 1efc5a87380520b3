"""amsrag's retrieval inside other frameworks, each an optional extra that imports its framework only in its
own module: `amsrag.integrations.langchain` (`pip install 'amsrag[langchain]'`), `.llamaindex`
(`amsrag[llamaindex]`), `.haystack` (`amsrag[haystack]`). All three hand on what `amsrag.Index.retrieve`
returns, in its order, with the metadata of `amsrag.api.passages.retrieved` (docs/integrations.md)."""

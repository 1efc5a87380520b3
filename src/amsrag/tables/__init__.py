"""Tables as an index keeps them, below the store that persists them (issue 41): the one SQL layout and column
profiles (`table.py`), the catalog (`catalog.py`), the `TableSource` / `SqlRunner` Protocols and their types
(`base.py`), the SQL guard (`guard.py`), table retrieval (`search.py`) and the embedded table store (`store.py`).
The structured route over them (the semantic parser, text-to-SQL) is `amsrag.structured`."""

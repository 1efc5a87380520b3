"""Tables as an index keeps them, below the store that persists them (issue 41): the one SQL layout and column
profiles (`table.py`), the catalog (`catalog.py`), the `TableSource` / `SqlRunner` Protocols and their types
(`base.py`) and the SQL guard (`guard.py`). The stores that keep them and the table retrieval both build
(`store.table_search`) are in `amsrag.store`; the structured route over them (the semantic parser, text-to-SQL)
is `amsrag.structured`."""

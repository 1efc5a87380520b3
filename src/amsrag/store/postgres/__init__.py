"""The PostgreSQL + pgvector store backend (`pip install 'amsrag[postgres]'`).

Import `amsrag.store.postgres.store.PostgresIndex` (or use `amsrag.store.open.open_index` with a
postgresql:// URL); this package itself imports no driver, so amsrag works without the extra.
"""

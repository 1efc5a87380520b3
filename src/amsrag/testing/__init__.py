"""Test suites other code can reuse: `amsrag.testing.store.StoreConformance`, the store conformance suite by
capability (read, write, health, tables, themes, query library) every backend passes. Importing this package
needs pytest; nothing in amsrag imports it."""

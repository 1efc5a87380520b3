"""Test suites other code can reuse: `amsrag.testing.store.PassageIndexConformance`, the store
conformance suite every `PassageIndex` backend passes. Importing this package needs pytest; nothing
in amsrag imports it."""

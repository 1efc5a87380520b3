"""The structured (vectorless) route: tables in the store, a semantic parser writing guarded SQL over them."""

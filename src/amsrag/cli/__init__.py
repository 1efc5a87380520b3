"""The `amsrag` command line: one module per command group (index, classifier, evaluator, eval, route), the
query commands and `demo` in `main`."""

from amsrag.cli.main import app, main

__all__ = ["app", "main"]

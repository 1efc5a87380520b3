"""The learning wing: everything that fits a model, none of it needed to answer a question.

- `learn.classifier`: training data, training, calibration/gate fitting, evaluation and baselines of the
  complexity classifier (`amsrag.classify` loads and runs the artifact);
- `learn.evaluator`: training pools, training and evaluation of the corrective step's retrieval evaluator
  (`amsrag.correct` scores with the artifact);
- `learn.router`: `amsrag train route tune` — router thresholds, per-class routes, CA-RRF priors and the MMR gate
  fitted on calibration questions (the router reads what it writes);
- `learn.label`: silver complexity labels for the user's own generator (runs the engine);
- `learn.common`: what both trainers share (the on-disk embedding cache, seeded hash order, standardisation).

`learn` imports the runtime packages; no runtime package imports `learn`.
"""

"""Training of the retrieval evaluator: candidate pools from the shared data (`data`), cached embeddings and
NER labels (`embedding`), model fitting, calibration, tri-state thresholds and metrics (`train`)."""

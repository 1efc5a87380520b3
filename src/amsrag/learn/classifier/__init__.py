"""Training of the complexity classifier: labelled data (`data`), heads, calibration and the zero-hop gate
(`train`), metrics (`evaluate`) and the report's baselines (`baselines`)."""

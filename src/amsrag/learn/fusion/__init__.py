"""Training the learned fuser (`amsrag train fusion train`): candidates and features from real retrieval passes over
the evaluation corpus (`data`), a LightGBM lambdarank model and the expert memory (`train`)."""

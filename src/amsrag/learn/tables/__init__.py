"""Training the semantic parser for tables on WikiTableQuestions (`python -m amsrag.learn.tables.train`):
questions and tables with the split by table (`data`; `data.is_test_table` is the test-split rule), labelled
candidate programs (`collect`) and the ranker with its confidence calibration and card (`train`)."""

"""Evaluating the corpus themes on data with known topics."""

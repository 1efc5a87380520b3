"""The drift reference shipped in the package (`python -m amsrag.learn.monitor`)."""

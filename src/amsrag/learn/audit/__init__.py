"""Training of the citation-support audit (`amsrag train audit train`)."""

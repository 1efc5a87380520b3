"""Training of the citation-support audit (`amsrag audit train`)."""

"""The ground floor for text: language detection, the question key and what a question's wording says.
Nothing here imports another amsrag package."""

"""Data: synthetic generators from the papers' own models, and the offline digit datasets."""

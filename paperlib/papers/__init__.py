"""One subpackage per chapter, named by the chapter's slug (``notebooks/<slug>.md``,
``notebooks/presets/<slug>/``): that paper's experiments and analysis."""

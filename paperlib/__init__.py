"""paperlib: the support library behind the executable reproductions in this book.

The chapters read like papers; the machinery they share lives here, as ordinary modules with
unit tests (``tests/`` mirrors this tree):

- ``core/``    the book's machinery, no mathematics
  - ``params``   presets, schemas, validation: the one path by which a parameter reaches a chapter
  - ``chapter``  the scaffold every chapter opens (``open_chapter``) and closes with
  - ``ledger``   the claims ledger; verdicts are computed here, never written by hand
  - ``seeding``  one seed for everything; distinct labels give independent streams
  - ``devices``  CUDA when present, else CPU; one thread where rounding would depend on the count
  - ``plotting`` the book's style and its recurring figures
  - ``runner``   executing a chapter with papermill; per-chapter cache stamps
  - ``sweep``    seeds and parameter grids on Dask, and their aggregate
  - ``book``     building the book: executed chapters, the claims page, nbval references
  - ``cli``      ``python -m paperlib run|sweep|sweep-report|list|book|reference|nbval-prepare``
- ``maths/``   shared mathematics: ``activations`` (Gaussian and Hermite constants), ``kernels``
  (closed forms and Monte Carlo), ``linalg`` (Jacobian Grams, Khatri-Rao spectra), ``spectral``
  (matrix-free Jacobian spectra), ``stats`` (slopes, crossings, intervals)
- ``nets/``    shared networks and training: ``shallow`` (the theory papers' network),
  ``training`` (the training-loop base and the shallow network's GD and SGD),
  ``optim`` (the settings every optimizer shares)
- ``data/``    ``synthetic`` (generators from the papers' own models), ``digits`` (offline digits
  and MNIST-1D)
- ``papers/<slug>/``  one package per chapter, named by ``notebooks/<slug>.md``. Each has
  ``experiments`` (one function, or one method of a study object, per section of the chapter:
  it runs the section and returns its measurements; the chapter records the claims),
  ``figures`` (the chapter's figures from those measurements) and ``claims.yaml`` (what each
  claim says, declared once), beside the paper's own machinery:
  ``moderate_overparam`` (``overparam``, ``phase``), ``jacobian_lowrank`` (``multiclass``,
  ``resnet``), ``resnet_beyond_kernels`` (``hypercube``, ``hiernet``), ``bottleneck``
  (``deepfc``, ``repcost``), ``manifold_lsh`` (``manifolds``)
"""

__version__ = "0.1.0"

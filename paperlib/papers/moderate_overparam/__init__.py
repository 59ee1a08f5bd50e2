"""Oymak & Soltanolkotabi (2019), *Towards moderate overparameterization*: the theory's predictions
(:mod:`.overparam`) and the batched phase-diagram trainer of Figure 2 (:mod:`.phase`).
:mod:`.experiments` runs the chapter's sections, :mod:`.figures` draws its figures."""

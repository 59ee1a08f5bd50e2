"""Jacot (2023), *Bottleneck structure in learned features*: deep fully connected networks with L2
regularization (:mod:`.deepfc`) and the representation cost, its bounds and constructions (:mod:`.repcost`).
:mod:`.experiments` runs the chapter's sections, :mod:`.figures` draws its figures."""

"""Dikkala, Kaplun & Panigrahy (2021), deep networks as locality-sensitive hash functions on manifolds
(:mod:`.manifolds`).
:mod:`.experiments` runs the chapter's sections, :mod:`.figures` draws its figures."""

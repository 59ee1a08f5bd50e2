"""Dikkala, Kaplun & Panigrahy (2021), deep networks as locality-sensitive hash functions on manifolds
(:mod:`.manifolds`)."""

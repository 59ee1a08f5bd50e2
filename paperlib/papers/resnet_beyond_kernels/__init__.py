"""Allen-Zhu & Li (2019), *What can ResNet learn efficiently, going beyond kernels?*: Fourier analysis
on the Boolean cube and the hierarchical target (:mod:`.hypercube`), and the batched small networks (:mod:`.hiernet`).
:mod:`.experiments` runs the chapter's sections, :mod:`.figures` draws its figures."""

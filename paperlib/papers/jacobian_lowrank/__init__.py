"""Oymak, Fabian, Li & Soltanolkotabi (2019), *Generalization guarantees via the low-rank Jacobian*:
the multiclass theory network (:mod:`.multiclass`) and the ResNet without BatchNorm (:mod:`.resnet`).
:mod:`.experiments` runs the chapter's sections, :mod:`.figures` draws its figures."""

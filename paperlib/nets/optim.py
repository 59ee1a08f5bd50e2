"""Settings shared by every torch optimizer of the trainers, in a module of its own so that importing it
pulls in nothing else (a chapter's cache stamp covers the modules it imports)."""

#: ``foreach=`` for every torch optimizer here: the multi-tensor update gives bit-for-bit the same
#: parameters as the default per-tensor loop on a CPU (tested), with fewer launches (Adam's step on
#: bottleneck's stacked networks 1.5x faster on one core); on a GPU it is torch's default anyway.
#: (``fused=True`` is faster still but rounds differently, so it would move results.)
FOREACH = True

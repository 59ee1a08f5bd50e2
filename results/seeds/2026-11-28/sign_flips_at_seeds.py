"""propB4-sign-flips at smoke, seeds 0-9: each judged ratio against the old band [1.1, 1.35] and in standard
deviations of its derived spread (the check since 831a075)."""
import numpy as np
from paperlib.core import params
from paperlib.papers.resnet_beyond_kernels import experiments as ex
for seed in range(10):
    P = params.plan("resnet-beyond-kernels", "smoke", {"seed": seed})
    study = ex.Study(P, "cpu"); study.lemmas(); study.hermite_constants()
    f = study.sign_flips()
    r = np.array(list(f.judged.values())); z = np.array(list(f.deviations.values()))
    print(seed, "old band", "pass" if ((r >= 1.1) & (r <= 1.35)).all() else "FAIL", np.round(r, 3).tolist(), "| z", np.round(z, 2).tolist(), flush=True)

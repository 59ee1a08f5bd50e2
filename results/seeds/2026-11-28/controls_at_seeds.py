"""Every control of every chapter at smoke, at seeds that no control was chosen on: do its flips come out `not
reproduced`, do its held claims still not, and do the consistency checks pass? Usage: OUT_DIR [SEED ...] (default 3 4)."""
import json, os, pathlib, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
ROOT = pathlib.Path(__file__).resolve().parents[3]
from paperlib.core import controls, params as P

OUT = pathlib.Path(sys.argv[1])
SEEDS = [int(s) for s in sys.argv[2:]] or [3, 4]
env = dict(os.environ, OMP_NUM_THREADS="1")

def one(job):
    paper, control, seed = job
    out = OUT / paper / control["name"] / f"seed={seed}"
    ledger_path = out / f"{paper}.json"
    if not ledger_path.exists():
        overrides = [a for k, v in {**control["parameters"], "seed": seed}.items() for a in ("-p", k, json.dumps(v))]
        r = subprocess.run([sys.executable, "-m", "paperlib", "run", paper, "--preset", "smoke", "--out", str(out), *overrides],
                           cwd=ROOT, capture_output=True, text=True, env=env)
        if r.returncode:
            return f"{paper} {control['name']} seed {seed}: run failed rc={r.returncode}: {r.stderr[-500:]}"
    claims = {c["id"]: c for c in json.loads(ledger_path.read_text())["claims"]}
    flips = {k: (claims[k]["verdict"], claims[k]["measured"]) if k in claims else None for k in control["flips"]}
    held = {k: (claims[k]["verdict"], claims[k]["measured"]) if k in claims else None for k in control.get("held", {})}
    bad_cons = [(c["id"], c["verdict"]) for c in claims.values() if c["kind"] == "consistency" and c["verdict"] != "reproduced"]
    ok_flips = all(v and v[0] == "not reproduced" for v in flips.values())
    ok_held = all(v and v[0] != "not reproduced" for v in held.values())
    status = "OK" if ok_flips and ok_held and not bad_cons else "DIFFERS"
    return f"{status} {paper} {control['name']} seed {seed} flips={flips} held={held} consistency_fail={bad_cons}"

jobs = [(p, c, s) for p in P.available_papers() for c in controls.load(p) for s in SEEDS]
with ThreadPoolExecutor(2) as pool:
    for line in pool.map(one, jobs):
        print(line, flush=True)

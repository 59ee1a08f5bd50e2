"""Compare each control run at default (runs/ctl-default/P--NAME) with a baseline default run of P.
Prints one line per control: listed flips and held claims with verdict/measured; other claims whose verdict moved."""
import json, sys, glob, os, yaml
root = sys.argv[1]          # folder of control runs
base = sys.argv[2]          # folder with P/P.json baselines
# sys.argv[3]: the checkout whose controls.yaml the runs used
def short(v):
    if isinstance(v, float): return float(f"{v:.4g}")
    if isinstance(v, list): return [short(x) for x in v[:6]]
    return v
for d in sorted(glob.glob(f"{root}/*--*")):
    p, name = os.path.basename(d).split("--", 1)
    f = f"{d}/{p}.json"
    if not os.path.exists(f):
        print(p, name, "NO LEDGER"); continue
    ctl = {c["id"]: c for c in json.load(open(f))["claims"]}
    b = {c["id"]: c for c in json.load(open(f"{base}/{p}/{p}.json"))["claims"]}
    spec = next(c for c in yaml.safe_load(open(f"{sys.argv[3]}/notebooks/presets/{p}/controls.yaml")) if c["name"] == name)
    t = open(f"{d}/time").read().strip() if os.path.exists(f"{d}/time") else "?"
    out = {"flips": {}, "held": {}}
    for k in ("flips", "held"):
        for cid in spec.get(k, []):
            c = ctl.get(cid); bb = b.get(cid)
            out[k][cid] = (c["verdict"], short(c["measured"])) if c else "absent"
            if bb: out[k][cid] += ("base", bb["verdict"], short(bb["measured"]))
    listed = set(spec.get("flips", [])) | set(spec.get("held", {}))
    moved = {cid: (b[cid]["verdict"] if cid in b else None, c["verdict"], short(c["measured"]))
             for cid, c in ctl.items() if cid not in listed and (cid not in b or b[cid]["verdict"] != c["verdict"])}
    cons_fail = [cid for cid, c in ctl.items() if c["kind"] == "consistency" and c["verdict"] != "reproduced"]
    print(f"{p} {name} ({t} s)\n  listed: {out}\n  other moves: {moved}\n  consistency failing: {cons_fail}")

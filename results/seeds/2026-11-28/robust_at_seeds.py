"""The robust claims that do not hold (``ledger.robust_failures``) in every ledger below the folders given,
e.g. those of ``python -m paperlib sweep PAPER --preset smoke --seeds 3-9 --out DIR``."""
import json
import pathlib
import sys

from paperlib.core import ledger

for root in sys.argv[1:]:
    for path in sorted(pathlib.Path(root).rglob("*.json")):
        data = json.loads(path.read_text())
        if "claims" not in data:
            continue
        failures = ledger.robust_failures(data["claims"])
        print(f"{path}: {sum(c['robust'] for c in data['claims'])} robust, {len(failures)} not holding")
        for c in failures:
            print(f"   {c['id']}: {c['verdict']}, measured {c['measured']}; {c['why'][:200]}")

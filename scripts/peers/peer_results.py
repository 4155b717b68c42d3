"""The results file every PyTorch peer writes (scripts/bench/*.lua read it with --peer):
    {"meta": {...}, "order": [case names], "cases": {name: {...}}}
JSON has no NaN or infinity: those become null."""
import json
import math
import sys


def clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v


def write(path, meta, order, cases):
    with open(path, "w") as f:
        json.dump(clean(dict(meta=meta, order=order, cases=cases)), f, indent=2, sort_keys=True,
                  allow_nan=False)
        f.write("\n")
    print("wrote %s" % path)


def finish(script, path, meta, order, cases, failures):
    """The peer's end: the results written where asked, the failed cases named; its exit status."""
    if path:
        write(path, meta, order, cases)
    if failures:
        print("%s: %d case(s) failed: %s" % (script, len(failures), "; ".join(failures)),
              file=sys.stderr)
        return 1
    return 0

"""The public int8 recipes (`quantize.PUBLIC_RECIPES`) gated on the demo, every row, and kept as a search record.

    python research/scripts/public_recipes_on_demo.py [--out /tmp/public-recipes]

Assembles the demo checkpoint, exports it, gates the four candidates on its shipped goldens' selection split
with `--exhaustive-search` semantics (a refusal's record holds no speed, so the timer is a constant) and saves
the record under OUT/records. `records.merge_refusals` joins it with an earlier refusal of the other candidates
into the record the package ships (docs/artifacts-gate.md).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from laya_artifacts.checkpoints import demo
from laya_artifacts.export.onnx_export import GRAPH_FILE, export_checkpoint
from laya_artifacts.goldens.record import load_goldens, shipped_goldens
from laya_artifacts.search import precision as search
from laya_artifacts.search.quantize import PUBLIC_RECIPES
from laya_artifacts.search.records import decision_key, save_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/public-recipes")
    out = Path(parser.parse_args().out)
    started = time.time()
    checkpoint = demo.demo_checkpoint(out / "cache")
    found = shipped_goldens(checkpoint)
    assert found is not None, "the demo's shipped goldens are not today's corpus"
    goldens = load_goldens(found)
    raw = out / "raw"
    if not (raw / GRAPH_FILE).is_file():
        export_checkpoint(checkpoint, raw)
    names = list(PUBLIC_RECIPES)
    result = search.precision_search(raw / GRAPH_FILE, raw, out / "scratch", goldens, "cpu-int8", candidates=names,
                                     exhaustive=True, timer=lambda names_, _d, _b: [[1.0] for _ in names_],
                                     progress=lambda m: print("%6.0f %s" % (time.time() - started, m), flush=True))
    print(save_record(decision_key(checkpoint, goldens, names, search.MIN_SPEEDUP), result.record, out / "records"))
    (out / "search.json").write_text(json.dumps(result.record, indent=1))


if __name__ == "__main__":
    main()

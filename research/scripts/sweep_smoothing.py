"""SmoothQuant's alpha, swept on a test checkpoint's selection split: is the int8 error carried by outlier channels?

    python scripts/sweep_smoothing.py [--kind minilm|tiny-modernbert|demo] [--alphas 0.3,0.5,0.7,0.9]
                                      [--scope all,layernorm-inputs]

For each (scope, alpha) the FP32 export is smoothed (`laya_artifacts.search.smoothing`) on the search's calibration
cases, then every encoder MatMul gets the `encoder` candidate's dynamic int8, and the graph is gated on the
goldens' selection split, as the search gates (the committed goldens of a test checkpoint; the demo's
are recorded with upstream first, about a minute). Scope `all` smooths every encoder MatMul (what the
`encoder-smoothquant` candidate does); `layernorm-inputs` only those reading a LayerNorm's output (Q/K/V and
the first FFN MatMul, SmoothQuant's original placement). Unsmoothed `encoder` is printed first. If no alpha
brings the median |dp| down, the error is spread over every row, which smoothing cannot fix.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_LAYERNORM_INPUT = re.compile(r"/(attention/self/(query|key|value)|attn/Wqkv|intermediate/dense|mlp/Wi)/MatMul$")


def main() -> int:
    from laya_artifacts.checkpoints.make import make_checkpoint
    from laya_artifacts.export.onnx_export import GRAPH_FILE, export_checkpoint
    from laya_artifacts.search import precision as search
    from laya_artifacts.search.quantize import FIXED_CANDIDATES, encoder_matmuls, quantize_candidate
    from laya_artifacts.search.smoothing import smooth_graph
    from laya_serverless import Decider
    from laya_serverless.gate.replay import gate_rows

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", default="minilm", help="a test checkpoint with committed goldens")
    parser.add_argument("--alphas", default="0.3,0.5,0.7,0.9")
    parser.add_argument("--scope", default="all,layernorm-inputs")
    args = parser.parse_args()
    encoder = next(c for c in FIXED_CANDIDATES if c.name == "encoder")
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        if args.kind == "demo":
            from laya_artifacts.checkpoints.demo import demo_checkpoint
            from laya_artifacts.goldens.corpus import builtin_cases
            from laya_artifacts.goldens.record import record_goldens

            checkpoint = demo_checkpoint(scratch / "checkpoint")
            goldens = record_goldens(checkpoint, "demo", None, cases=builtin_cases())
        else:
            checkpoint = make_checkpoint(args.kind, scratch / "checkpoint")
            goldens = json.loads((ROOT / "goldens" / args.kind / "goldens.json").read_text(encoding="utf-8"))
        raw = export_checkpoint(checkpoint, scratch / "raw")
        sweep = search._Search(raw / GRAPH_FILE, raw, scratch, goldens, "cpu-int8", 1, print, search.wall_clock)
        chosen = encoder_matmuls(raw / GRAPH_FILE).select(encoder)
        scopes = {"all": chosen, "layernorm-inputs": [n for n in chosen if _LAYERNORM_INPUT.search(n)]}

        def gated(label: str, graph: Path) -> None:
            quantized = scratch / ("%s-int8.onnx" % label)
            quantize_candidate(graph, quantized, encoder)
            decider = Decider.from_artifact(search.prepare_artifact(quantized, raw, scratch / label), verify=False,
                                            threads=1)
            report = gate_rows(decider, sweep.rows, "cpu-int8", search.SELECTION, repeat=False)
            print("%-28s %s" % (label, sweep.figures(report)), flush=True)

        gated("encoder (no smoothing)", raw / GRAPH_FILE)
        for scope in args.scope.split(","):
            for alpha in (float(a) for a in args.alphas.split(",")):
                label = "%s alpha %g" % (scope, alpha)
                smoothed = scratch / ("%s-%g.onnx" % (scope, alpha))
                smooth_graph(raw / GRAPH_FILE, smoothed, scopes[scope], sweep.calibration(), alpha)
                gated(label.replace(" ", "-"), smoothed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

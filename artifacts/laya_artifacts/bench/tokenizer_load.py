"""What loading an artifact's tokenizer costs a cold start, way by way, each in a fresh process.

    laya-artifacts bench tokenizer-load TOKENIZER.json [--rounds 5]

Ways: `from-file` (`Tokenizer.from_file`, what the runtime does, `core/tokenize.py`), `from-str` (the file read
as text, then `Tokenizer.from_str`), `from-buffer` (read as bytes, `Tokenizer.from_buffer`), `compact-json`
(the same tokenizer re-serialized without indentation, `to_str()`, then loaded from that file) and `pickle` (the
tokenizer pickled beforehand, unpickled: `tokenizers` pickles its JSON, so this is a pre-serialization check).
Per way, medians over the rounds: ms to import `tokenizers`, ms to load, the RSS the load added, and the ms of
the first encode of a short text (lazy work a load may defer).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WAYS = ("from-file", "from-str", "from-buffer", "compact-json", "pickle")

PROBE = r"""
import json, pickle, sys, time
def rss():
    return next(int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith("VmRSS"))
way, path = sys.argv[1], sys.argv[2]
start = time.perf_counter()
from tokenizers import Tokenizer
imported = time.perf_counter()
before = rss()
loaded_at = time.perf_counter()
if way in ("from-file", "compact-json"):
    tok = Tokenizer.from_file(path)
elif way == "from-str":
    tok = Tokenizer.from_str(open(path, encoding="utf-8").read())
elif way == "from-buffer":
    tok = Tokenizer.from_buffer(open(path, "rb").read())
else:
    tok = pickle.loads(open(path, "rb").read())
loaded = time.perf_counter()
tok.encode("I was charged twice for one order, please help.", add_special_tokens=False)
encoded = time.perf_counter()
print(json.dumps({"import_ms": (imported - start) * 1000, "load_ms": (loaded - loaded_at) * 1000,
                  "rss_added_mb": rss() - before, "first_encode_ms": (encoded - loaded) * 1000,
                  "vocab": tok.get_vocab_size()}))
"""


def _prepared(tokenizer: Path, scratch: Path) -> dict[str, Path]:
    """The file each way reads: the tokenizer itself, its compact re-serialization, its pickle."""
    import pickle

    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    compact, pickled = scratch / "compact.json", scratch / "tokenizer.pickle"
    compact.write_text(tok.to_str(), encoding="utf-8")
    pickled.write_bytes(pickle.dumps(tok))
    return {"from-file": tokenizer, "from-str": tokenizer, "from-buffer": tokenizer, "compact-json": compact,
            "pickle": pickled}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tokenizer", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="laya-tokenizer-") as scratch:
        files = _prepared(args.tokenizer, Path(scratch))
        print("%s: %d bytes; compact JSON %d bytes; pickle %d bytes" % (
            args.tokenizer, args.tokenizer.stat().st_size, files["compact-json"].stat().st_size,
            files["pickle"].stat().st_size))
        results: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
        for _ in range(args.rounds):   # rounds rotate over the ways, so a busy neighbour slows all alike
            for way in WAYS:
                out = subprocess.run([sys.executable, "-c", PROBE, way, str(files[way])], check=True,
                                     capture_output=True, text=True).stdout
                results[way].append(json.loads(out))
    for way, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print("%-13s import %4.0f ms  load %6.0f ms  RSS +%4.0f MB  first encode %5.1f ms  (vocab %d)"
              % (way, med["import_ms"], med["load_ms"], med["rss_added_mb"], med["first_encode_ms"], med["vocab"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Write a local checkpoint in the upstream Laya layout: `python scripts/make_checkpoint.py KIND --out DIR`."""

import sys

from laya_artifacts.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["make-checkpoint", *sys.argv[1:]]))

"""Blank the GPU code a shared library carries for other GPU architectures, so it packs small (gpu_payload.py).

    python scripts/gpu_prune_fatbin.py LIB.so OUT.so --keep-sm 90

onnxruntime-gpu 1.31.1's CUDA provider (284 MB) is mostly `.nv_fatbin`: one ELF cubin per kernel and per
architecture (sm_75, 80, 86, 89, 90, 120; no PTX). A GPU runs only the cubin of its own major version, so on
an H200 (sm_90) the others are never loaded. Their bytes are zeroed in place (headers, sizes and offsets
kept, so the ELF layout is unchanged) and zstd/xz then pack them to nothing: 284 MB -> ~90 MB packed.
Refused, nothing written: a fatbin whose entries do not tile it, PTX in it (a driver may JIT it), or no
cubin of the kept architecture.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2


def fatbin_section(path: Path) -> tuple[int, int]:
    """(file offset, size) of the library's `.nv_fatbin` section, from readelf."""
    listing = subprocess.run(["readelf", "-S", "-W", str(path)], check=True, capture_output=True, text=True).stdout
    for line in listing.splitlines():
        fields = line.replace("[ ", "[").split()
        if ".nv_fatbin" in fields:
            i = fields.index(".nv_fatbin")
            return int(fields[i + 3], 16), int(fields[i + 4], 16)
    raise ValueError("%s has no .nv_fatbin section" % path)


def prune(data: bytearray, offset: int, size: int, keep_sm: int) -> dict[str, object]:
    """Zero every ELF entry's payload whose architecture is not `keep_sm`; returns what was kept and blanked."""
    kept, blanked, pos, end, fatbins = Counter[int](), Counter[int](), offset, offset + size, 0
    while pos < end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:   # alignment padding between fatbins
            pos += 8
            continue
        fatbins += 1
        entry, stop = pos + header_size, pos + header_size + fat_size
        while entry < stop:
            kind, _unknown, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch = struct.unpack_from("<I", data, entry + 0x1C)[0]
            if kind == KIND_PTX:
                raise ValueError("fatbin at %#x holds PTX (sm_%d): a driver could compile it, not pruned" % (pos, arch))
            if kind == KIND_ELF and arch != keep_sm:
                start = entry + entry_header
                data[start:start + payload] = bytes(payload)
                blanked[arch] += payload
            elif kind == KIND_ELF:
                kept[arch] += payload
            entry += entry_header + payload
        if entry != stop:
            raise ValueError("fatbin at %#x: entries end at %#x, not at %#x" % (pos, entry, stop))
        pos = stop
    if not kept:
        raise ValueError("no sm_%d cubin in the library: it would run nowhere" % keep_sm)
    return {"fatbins": fatbins, "kept_bytes": dict(kept), "blanked_bytes": dict(sorted(blanked.items()))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("library", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--keep-sm", type=int, default=90, help="the architecture to keep (90: H100/H200)")
    args = parser.parse_args()
    data = bytearray(args.library.read_bytes())
    try:
        summary = prune(data, *fatbin_section(args.library), args.keep_sm)
    except ValueError as exc:
        print("gpu_prune_fatbin: %s" % exc, file=sys.stderr)
        return 2
    args.out.write_bytes(bytes(data))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""scripts/gpu_prune_fatbin.py: other architectures' cubins are zeroed in place, the kept one and every header stay,
and a fatbin it cannot read whole (PTX in it, entries that do not tile it, no kept cubin) is refused."""

from __future__ import annotations

import importlib.util
import struct
from types import ModuleType

import pytest

from tests.paths import ROOT

SOURCE = ROOT / "scripts" / "gpu_prune_fatbin.py"
ENTRY_HEADER = 0x40


@pytest.fixture(scope="module")
def prune() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_prune_fatbin_under_test", SOURCE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def entry(kind: int, arch: int, payload: bytes) -> bytes:
    header = bytearray(ENTRY_HEADER)
    struct.pack_into("<HHIQ", header, 0, kind, 0x101, ENTRY_HEADER, len(payload))
    struct.pack_into("<I", header, 0x1C, arch)
    return bytes(header) + payload


def fatbin(*entries: bytes, size_delta: int = 0) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body) + size_delta) + body


def test_only_the_kept_architectures_cubins_keep_their_bytes(prune: ModuleType) -> None:
    kept, other = b"\x7fELF-sm90-code!!", b"\x7fELF-sm80-code!!"
    section = fatbin(entry(2, 80, other), entry(2, 90, kept)) + bytes(8) + fatbin(entry(2, 120, other))
    data = bytearray(b"head" + section + b"tail")
    summary = prune.prune(data, 4, len(section), 90)
    assert summary == {"fatbins": 2, "kept_bytes": {90: len(kept)}, "blanked_bytes": {80: len(other), 120: len(other)}}
    assert len(data) == 8 + len(section) and data[:4] == b"head" and data[-4:] == b"tail"
    assert kept in data and other not in data
    assert bytes(data).count(struct.pack("<I", 0xBA55ED50)) == 2   # headers untouched


@pytest.mark.parametrize(("section", "message"), [
    (fatbin(entry(1, 90, b"ptx"), entry(2, 90, b"elf")), r"holds PTX \(sm_90\)"),
    (fatbin(entry(2, 90, b"elf"), size_delta=-1), r"entries end at 0x[0-9a-f]+, not at"),
    (fatbin(entry(2, 80, b"elf")), r"no sm_90 cubin in the library"),
])
def test_what_it_cannot_read_whole_is_refused(prune: ModuleType, section: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        prune.prune(bytearray(section), 0, len(section), 90)

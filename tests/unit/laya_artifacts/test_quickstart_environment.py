"""`make serve` configures the server it starts by handing it an environment, never by writing `os.environ`: the
embedded defaults under whatever the user set."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest


def test_make_serve_hands_its_defaults_to_the_server_and_leaves_the_environment_alone(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import laya_serverless.local_edge.cli as local_cli
    from laya_artifacts import quickstart

    monkeypatch.setattr(quickstart, "ensure_published", lambda store, cache, keys: "cpu-fp32")
    monkeypatch.setattr(quickstart, "ensure_signed", lambda store, keys, target: tmp_path / "keys" / "public.pem")
    seen: dict[str, Any] = {}

    def server(argv: list[str], environ: dict[str, str] | None = None) -> int:
        seen.update(argv=argv, environ=environ)
        return 0

    monkeypatch.setattr(local_cli, "main", server)
    monkeypatch.setenv("LAYA_PORT", "8123")
    monkeypatch.setenv("LAYA_CACHE_DIR", str(tmp_path / "mine"))   # the user's word wins over the default
    monkeypatch.delenv("LAYA_TARGET", raising=False)
    before = dict(os.environ)
    args = argparse.Namespace(store=str(tmp_path / "store"), cache=str(tmp_path / "cache"),
                              keys=str(tmp_path / "keys"), once=False)
    assert quickstart.run(args) == 0
    assert dict(os.environ) == before
    environ = seen["environ"]
    assert seen["argv"] == ["serve"] and environ["LAYA_TARGET"] == "cpu-fp32"
    assert environ["LAYA_STORE"] == str(tmp_path / "store") and environ["LAYA_DEPLOYED"] == "english=demo"
    assert (environ["LAYA_PORT"], environ["LAYA_CACHE_DIR"]) == ("8123", str(tmp_path / "mine"))

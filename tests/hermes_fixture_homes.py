"""Writable copies of the Hermes homes in /work/shared/data/hermes-homes (read-only there)."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

HERMES_HOMES = Path("/work/shared/data/hermes-homes")
# v2 (early Hermes), v25 (Hermes 0.20.0), v25-cjk (with Hermes's CJK tokenizer).
FIXTURES = sorted(p.name for p in HERMES_HOMES.glob("v*") if p.is_dir()) or ["v25"]


def copy_home(name: str, dest: Path) -> Path:
    """A writable copy of fixture home ``name`` under ``dest``; skips when it is not here."""
    if not (HERMES_HOMES / name).is_dir():
        pytest.skip(f"fixture home {HERMES_HOMES / name} is not here")
    home = dest / name
    shutil.copytree(HERMES_HOMES / name, home)
    for path in [home, *home.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return home

"""The wheel holds one top-level package, the commands inside it, and the completions in share/."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_layout(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("mqadmin-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert top == {"mqadmin"}
    assert "mqadmin/commands/reset_offset_by_time.py" in names
    assert not any(n.startswith(("commands/", "spark/")) for n in names)
    data = [n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n]
    assert sorted(data) == [
        "share/bash-completion/completions/mqadmin",
        "share/fish/vendor_completions.d/mqadmin.fish",
        "share/zsh/site-functions/_mqadmin",
    ]

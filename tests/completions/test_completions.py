"""The committed completion scripts match the registry, and bash really completes with them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mqadmin.completion import SHELLS, generate

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_committed_scripts_are_fresh(shell: str) -> None:
    committed = (ROOT / "completions" / SHELLS[shell]).read_text()
    assert committed == generate(shell), "stale: run python scripts/gen_completions.py"


def complete(words: list[str]) -> list[str]:
    """Source the script into bash, fill COMP_WORDS as bash would, call the function (as git's t9902)."""
    script = ROOT / "completions" / "bash" / "mqadmin"
    line = " ".join(words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\nCOMP_LINE={line!r}\n"
        "_mqadmin\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, check=True).stdout
    return [w for w in out.splitlines() if w]


def test_bash_completes_commands_and_options() -> None:
    assert complete(["mqadmin", "rese"]) == ["resetOffsetByTime", "reset-offset-by-time"]
    assert "resetOffsetByTime" in complete(["mqadmin", "res"])
    assert complete(["mqadmin", "resetOffsetByTime", "--dry"]) == ["--dry-run"]
    assert complete(["mqadmin", "queryOffset", "--output", "j"]) == ["json", "java"]
    assert complete(["mqadmin", "consumerConn"]) == ["consumerConnection"]
    assert "--max-lag-time" in complete(["mqadmin", "consumerProgress", "--max"])


@pytest.mark.parametrize(("shell", "check"), [("zsh", ["zsh", "-n"]), ("fish", ["fish", "--no-execute"])])
def test_other_shells_parse_their_script(shell: str, check: list[str]) -> None:
    if shutil.which(check[0]) is None:
        pytest.skip(f"{shell} is not installed (CI installs it)")
    subprocess.run([*check, str(ROOT / "completions" / SHELLS[shell])], check=True)

"""The committed completion scripts match the registry, and bash really completes with them."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from mqadmin.completion import SHELLS, generate
from tests.support.terminal import Terminal

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
    _need(shell)
    subprocess.run([*check, str(ROOT / "completions" / SHELLS[shell])], check=True)


# -- driving each shell's own completion: what a person gets after TAB ---------------------------

#: (typed line, what TAB gives): a set of candidates listed, or a str the line is completed to
CASES: list[tuple[str, set[str] | str]] = [
    ("mqadmin consumerConn", "mqadmin consumerConnection"),
    ("mqadmin help resetOff", "mqadmin help resetOffsetByTime"),
    ("mqadmin resetOffsetByTime -f ", {"true", "false"}),
    ("mqadmin queryOffset --output ", {"table", "json", "csv", "java"}),
    ("mqadmin queryOffset --time-field ", {"store", "born", "property:"}),
    ("mqadmin rangeReplay --engine ", {"local", "spark", "auto"}),
    ("mqadmin rangeReplay --to ", {"stdout", "jsonl:", "parquet:", "topic:", "group:"}),
    ("mqadmin rangeReplay --to jsonl:ou", "mqadmin rangeReplay --to jsonl:out.jsonl"),
    ("mqadmin rangeReplay --checkpoint ck", "mqadmin rangeReplay --checkpoint ckpt.json"),
    ("mqadmin restoreOffset --from back", {"backup-1.json", "backup-2.json"}),
    ("mqadmin consumerProgress --local-store sto", "mqadmin consumerProgress --local-store store-dir/"),
    ("mqadmin queryOffset --profile ", {"prod", "staging"}),
]


def _need(shell: str) -> None:
    if shutil.which(shell) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{shell} is not installed: .ci/run installs it")
        pytest.skip(f"{shell} is not installed (CI installs it)")


@pytest.fixture
def workdir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder with the files the cases complete, and a profile file in a private MQADMIN_HOME."""
    for name in ("backup-1.json", "backup-2.json", "ckpt.json", "out.jsonl"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "store-dir").mkdir()
    home = tmp_path / "mqhome"
    home.mkdir()
    (home / "config.ini").write_text("[prod]\nnamesrv = 10.0.0.5:9876\n\n[staging]\nnamesrv = 10.0.0.6:9876\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MQADMIN_HOME": str(home)}
    return tmp_path, env


def _listed(screen: str) -> set[str]:
    """Words TAB listed: the screen less the command lines themselves."""
    return {w for line in screen.splitlines() if "mqadmin" not in line for w in line.split()}


def _interactive(shell: list[str], setup: str, line: str, want: set[str] | str, cwd: Path, env: dict[str, str]) -> None:
    with Terminal(shell, cols=100, rows=30, env=env, cwd=cwd) as term:
        term.send(setup + "\n")
        term.wait_for(lambda s: s.rstrip().endswith("READY>"))
        term.send("clear\n")
        term.wait_for(lambda s: s.strip() == "READY>")
        term.send(line + ("\t" if isinstance(want, str) else "\t\t"))
        if isinstance(want, str):
            screen = term.wait_for(lambda s: want in s, timeout=10)
            assert f"READY> {want}" in screen.splitlines()[0]
        else:
            screen = term.wait_for(lambda s: want <= _listed(s), timeout=10)
        assert "command not found" not in screen and "error" not in screen.lower(), screen


@pytest.mark.parametrize(("line", "want"), CASES, ids=[c[0] for c in CASES])
def test_bash_tab(line: str, want: set[str] | str, workdir: tuple[Path, dict[str, str]]) -> None:
    script = ROOT / "completions" / "bash" / "mqadmin"
    setup = (
        f"source {script}; bind 'set show-all-if-ambiguous on'; bind 'set bell-style none'; "
        "bind 'set completion-query-items 0'; PS1='READY> '"
    )
    _interactive(["bash", "--norc", "--noprofile", "-i"], setup, line, want, *workdir)


@pytest.mark.parametrize(("line", "want"), CASES, ids=[c[0] for c in CASES])
def test_zsh_tab(line: str, want: set[str] | str, workdir: tuple[Path, dict[str, str]]) -> None:
    _need("zsh")
    setup = (
        f"fpath=({ROOT / 'completions' / 'zsh'} $fpath); autoload -Uz compinit; compinit -u -D; "
        "unsetopt beep; PROMPT='READY> '"
    )
    _interactive(["zsh", "-f", "-i"], setup, line, want, *workdir)


@pytest.mark.parametrize(("line", "want"), CASES, ids=[c[0] for c in CASES])
def test_fish_complete(line: str, want: set[str] | str, workdir: tuple[Path, dict[str, str]]) -> None:
    """fish's own completion engine (``complete -C``) on the line, as TAB would ask it."""
    _need("fish")
    cwd, env = workdir
    program = f"source {ROOT / 'completions' / 'fish' / 'mqadmin.fish'}; complete -C {shlex.quote(line)}"
    out = subprocess.run(
        ["fish", "--no-config", "-c", program], capture_output=True, text=True, cwd=cwd, env=env, check=True, timeout=30
    ).stdout
    got = {row.split("\t")[0] for row in out.splitlines() if row}
    if isinstance(want, str):
        assert got == {want.split()[-1]}
    else:
        assert want <= got, out

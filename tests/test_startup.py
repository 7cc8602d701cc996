"""`mqadmin --help` and a simple query must start fast: no heavy imports on their path."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyspark", "pyarrow", "mqadmin.spark", "rich", "mqadmin.remoting")


def loaded_after(args: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from mqadmin.cli import main\n"
        f"main({args!r})\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {{'pyspark','pyarrow','rich'}} "
        f"or m.startswith(('mqadmin.spark','mqadmin.remoting'))), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return set(eval(proc.stderr.strip().splitlines()[-1]))


def test_help_imports_nothing_heavy() -> None:
    assert loaded_after(["--help"]) == set()


def test_embedded_query_imports_nothing_heavy(tmp_path: object) -> None:
    assert loaded_after(["queryOffset", "-n", "mock://startup-test", "-t", "T", "--json"]) == set()

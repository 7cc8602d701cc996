"""The Spark engine (installed as ``mqadmin.spark``): the replay plan run as a PySpark job.

Importing this package is cheap and never imports pyspark: the CLI imports it only when an
engine is being chosen, and asks ``unavailable_reason()`` before anything starts a JVM.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess

from mqadmin.config import SECRET_ENV
from mqadmin.errors import UsageError

INSTALL_HINT = "pip install 'mqadmin[spark]'"
JAVA_HINT = "install Java 17+ (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
MIN_JAVA = 17
# SECRET_ENV is kept out of every process the engine starts (``java -version``, the JVM and so
# its Python workers and local executors), whose environment the same user can read; executors
# get the keys in their tasks instead


def environ_without_secrets() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in SECRET_ENV}


def java_path() -> str | None:
    """The java Spark will start: $JAVA_HOME/bin/java first (as spark-submit does), else PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


@functools.lru_cache(maxsize=8)
def java_major(java: str) -> int | None:
    """Major version from ``java -version`` (1.8 → 8), None when it cannot be told; asked once
    per process (the engine choice and the session both check it)."""
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=20, env=environ_without_secrets()
        )
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def unavailable_reason() -> str | None:
    """Why the Spark engine cannot run here (one line saying what to install), or None."""
    if importlib.util.find_spec("pyspark") is None:
        return f"pyspark is not installed: {INSTALL_HINT} (and Java {MIN_JAVA}+)"
    java = java_path()
    if java is None:
        return f"Spark needs Java {MIN_JAVA}+ and no java was found: {JAVA_HINT}"
    major = java_major(java)
    if major is not None and major < MIN_JAVA:
        return f"Spark needs Java {MIN_JAVA}+, {java} is Java {major}: {JAVA_HINT}"
    return None


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def local_cores(master: str) -> int | None:
    """Cores of a local master (``local`` 1, ``local[4]``, ``local[*]`` all), None for a cluster."""
    if master == "local":
        return 1
    m = re.fullmatch(r"local\[(\*|\d+)(?:,\s*\d+)?\]", master)
    if m:
        return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))
    m = re.fullmatch(r"local-cluster\[(\d+),\s*(\d+),\s*\d+\]", master)
    if m:
        return int(m.group(1)) * int(m.group(2))
    return None


def check_master(address: str, master: str) -> None:
    """A store opened from its files (an embedded mock, a broker's store) is a folder on this
    machine: only a local master can read it."""
    from mqadmin.admin import capabilities_of

    if capabilities_of(address).on_disk and not is_local_master(master):
        raise UsageError(
            f"{address} is a store on this machine; with --spark-master {master} the executors cannot read "
            "it: use --spark-master 'local[*]', or serve it (mockBroker --store, or a broker) and pass its address"
        )

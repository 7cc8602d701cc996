"""What executors connect with: the driver's options, TLS files as contents, the secret kept out
of reprs, and the files an executor writes private and gone once it has closed its connection."""

from __future__ import annotations

import pickle
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
from mqadmin.spark.jobs import ConnectSpec

import mqadmin.admin
from mqadmin.errors import UsageError
from mqadmin.mock.cluster import MockCluster

SECRET = "not-for-your-eyes"


@pytest.fixture
def tls_files(tmp_path: Path) -> dict[str, Path]:
    files = {key: tmp_path / f"{key}.pem" for key in ("tls_ca", "tls_cert", "tls_key")}
    for key, path in files.items():
        path.write_bytes(f"-----BEGIN {key}-----\n{key}-body\n".encode())
    return files


def spec_of(tls_files: dict[str, Path], address: str = "127.0.0.1:9876") -> ConnectSpec:
    options: dict[str, Any] = {"access_key": "ops", "secret_key": SECRET, "tls": True}
    return ConnectSpec.from_options(address, options | {k: str(p) for k, p in tls_files.items()}, timeout=7)


def test_the_spec_carries_contents_and_hides_them(tls_files: dict[str, Path]) -> None:
    spec = spec_of(tls_files)
    assert dict(spec.files) == {k: p.read_bytes() for k, p in tls_files.items()}
    assert dict(spec.options) == {"access_key": "ops", "secret_key": SECRET, "tls": True}
    assert SECRET not in repr(spec) and "body" not in repr(spec) and "127.0.0.1:9876" in repr(spec)
    assert pickle.loads(pickle.dumps(spec)) == spec  # what Spark does to it
    assert ConnectSpec.of(spec) is spec and ConnectSpec.of("mock://x") == ConnectSpec("mock://x")


def test_an_unreadable_tls_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^cannot read tls-key file .*missing\.pem: No such file"):
        ConnectSpec.from_options("127.0.0.1:9876", {"tls_key": str(tmp_path / "missing.pem")})


def test_an_executor_writes_the_files_private_and_removes_them(
    tls_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The options reach connect() as the driver gave them, the files under new paths with the
    same bytes, readable by their owner only, and gone once the connection is closed."""
    store = tmp_path / "store"
    MockCluster.create(store).close()
    scratch = tmp_path / "executor-tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    seen: dict[str, Any] = {}
    real_connect = mqadmin.admin.connect

    def recording_connect(address: str, **kwargs: Any) -> mqadmin.admin.Admin:
        seen.update(kwargs)
        for key in tls_files:
            path = Path(kwargs[key])
            seen[f"{key}:mode"] = stat.S_IMODE(path.stat().st_mode)
            seen[f"{key}:dir"] = stat.S_IMODE(path.parent.stat().st_mode)
            seen[f"{key}:bytes"] = path.read_bytes()
        return real_connect(address, read_only=kwargs["read_only"])

    monkeypatch.setattr(mqadmin.admin, "connect", recording_connect)
    spec = spec_of(tls_files, f"mock://{store}")
    with spec.open(read_only=True) as admin:
        assert admin.topic_route  # a working connection
    assert seen["access_key"] == "ops" and seen["secret_key"] == SECRET and seen["tls"] is True
    assert seen["timeout"] == 7 and seen["read_only"] is True
    for key, path in tls_files.items():
        assert Path(seen[key]).parent.parent == scratch and Path(seen[key]) != path
        assert seen[f"{key}:bytes"] == path.read_bytes()
        assert seen[f"{key}:mode"] == 0o600 and seen[f"{key}:dir"] == 0o700
    assert list(scratch.iterdir()) == []


def test_without_tls_files_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    MockCluster.create(store).close()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "none"))  # would fail if used
    with ConnectSpec(f"mock://{store}").open(read_only=True) as admin:
        assert admin.topic_route


@pytest.mark.parametrize("address", ["mock://demo", "mock:///var/mock", "store:///var/lib/rocketmq/store"])
def test_a_store_on_this_machine_needs_a_local_master(address: str) -> None:
    """Executors elsewhere cannot open files on the driver's machine: refused before any job."""
    from mqadmin.spark import check_master

    with pytest.raises(UsageError, match="a store on this machine"):
        check_master(address, "spark://10.0.0.1:7077")
    check_master(address, "local[*]")
    check_master("10.0.0.1:9876", "spark://10.0.0.1:7077")  # a cluster: every executor reaches it

"""The mock server's ACL refusals read as the real brokers' do (measured on 4.9.7 and 5.3.3)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from mqadmin.cli import main
from mqadmin.mock.cluster import MockCluster
from mqadmin.mock.seed import commit_at_time, fill_topic
from mqadmin.mock.server import MockServer
from mqadmin.output import Env

pytestmark = pytest.mark.integration

#: (version, unsigned, unknown key, wrong secret): the broker's reason as our CLI shows it
WORDING = [
    ("4.9.8", "No accessKey is configured", "No acl config for nobody", "Check signature failed for accessKey=ops"),
    ("5.3.3", "username cannot be null.", "User:nobody is not found.", "check signature failed."),
]


@pytest.mark.parametrize(("version", "unsigned", "unknown", "wrong"), WORDING)
def test_refusals(tmp_path: Path, version: str, unsigned: str, unknown: str, wrong: str) -> None:
    cluster = MockCluster.create(tmp_path / "store", version=version)
    fill_topic(cluster, "T", 8, 1_700_000_000_000, 1_700_000_600_000)
    for broker in cluster.brokers.values():
        commit_at_time(broker, "g", "T", None)
    with MockServer(cluster, namesrv_port=0, acl=("ops", "right-secret")) as server:
        for keys, reason in (((), unsigned), (("nobody", "x-secret"), unknown), (("ops", "wrong-secret"), wrong)):
            argv = ["queryOffset", "-n", server.namesrv_addr, "-t", "T", "-g", "g", "--timeout", "2"]
            if keys:
                argv += ["--access-key", keys[0], "--secret-key", keys[1]]
            out, err = io.StringIO(), io.StringIO()
            code = main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
            assert code == 1 and out.getvalue() == ""
            assert f": {reason} (check --access-key/--secret-key)" in err.getvalue(), err.getvalue()
            assert "permission denied by" in err.getvalue()
            assert "secret" not in err.getvalue().replace("--secret-key", "")

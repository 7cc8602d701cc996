"""Every command over TLS to real brokers (``tls`` marker).

The test makes a self-signed certificate with ``openssl``; namesrv and broker serve it with
``tls.server.mode=enforcing`` (TLS only) or ``permissive`` (TLS or plaintext), and the broker
registers with the namesrv over TLS too.  One cluster per (version, mode) for the module.
"""

from __future__ import annotations

import io
import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mqadmin.cli import main
from mqadmin.model import Message
from mqadmin.output import Env
from mqadmin.remoting.backend import RemotingAdmin
from tests.support import realbroker as rb

pytestmark = [pytest.mark.realbroker, pytest.mark.tls]

TOPIC = "TlsTopic"
GROUP = "TlsGroup"
QUEUES = 2
PER_QUEUE = 4
COMMITTED = 1


@dataclass
class Tls:
    version: str
    mode: str
    cluster: rb.RealCluster
    cert: Path
    workdir: Path

    def run(self, *args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        argv = [*args, "-n", self.cluster.namesrv_addr, "--timeout", "10"]
        code = main(argv, env=Env(stdout=out, stderr=err, stdin=io.StringIO("")))
        return code, out.getvalue(), err.getvalue()

    def tls_run(self, *args: str) -> tuple[int, str, str]:
        return self.run(*args, "--tls-ca", str(self.cert))


@pytest.fixture(
    scope="module",
    params=[("4.9.7", "enforcing"), ("4.9.7", "permissive"), ("5.3.3", "enforcing")],
    ids=lambda p: f"{p[0]}-{p[1]}",
)
def tls(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tls]:
    version, mode = request.param
    workdir = tmp_path_factory.mktemp(f"tls-{version}-{mode}")
    cert, key = rb.make_tls_files(workdir / "pki")
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.check_hostname = False
    cluster = rb.RealCluster(
        version,
        workdir / "rmq",
        jvm_props=rb.tls_server_props(mode, cert, key),
        tool_props=rb.tls_client_props(cert),
        tls=ctx,
    )
    with cluster:
        cluster.create_topic(TOPIC, QUEUES)
        cluster.create_topic(f"%RETRY%{GROUP}", 1)
        cluster.create_group(GROUP)
        admin = RemotingAdmin(cluster.namesrv_addr, timeout=10, tls=True, tls_ca=str(cert))
        try:
            for i in range(PER_QUEUE * QUEUES):
                admin.send(TOPIC, Message(TOPIC, f"tls-{i}".encode(), {"TAGS": "a"}))
        finally:
            admin.close()
        for q in range(QUEUES):
            cluster.commit_offset("broker-a", GROUP, TOPIC, q, COMMITTED)
        yield Tls(version, mode, cluster, cert, workdir)


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / "home"))


def test_every_read_command_over_tls(tls: Tls, tmp_path: Path) -> None:
    code, out, err = tls.tls_run("queryOffset", "-t", TOPIC, "-g", GROUP, "-s", "-1h", "--json")
    assert code == 0, err
    rows = json.loads(out)["queues"]
    assert [(q["max_offset"], q["consumer_offset"], q["offset_at_time"]) for q in rows] == [
        (PER_QUEUE, COMMITTED, 0)
    ] * QUEUES

    code, out, err = tls.tls_run("consumerProgress", "-g", GROUP, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["diff_total"] == (PER_QUEUE - COMMITTED) * QUEUES
    assert doc["lag_time_ms"] > 0

    code, out, err = tls.tls_run("consumerProgress", "--json")
    assert code == 0, err
    assert GROUP in [g["group"] for g in json.loads(out)["groups"]]

    dest = tmp_path / "replay.jsonl"
    code, out, err = tls.tls_run("rangeReplay", "-t", TOPIC, "-b", "-1h", "--to", f"jsonl:{dest}", "--json")
    assert code == 0, err
    assert json.loads(out)["written"] == PER_QUEUE * QUEUES
    assert len(dest.read_text().splitlines()) == PER_QUEUE * QUEUES


def test_reset_and_restore_over_tls(tls: Tls, tmp_path: Path) -> None:
    backup = tmp_path / "b.json"
    code, _, err = tls.tls_run(
        "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "-1h", "--yes", "--backup", str(backup)
    )
    assert code == 0, err
    code, out, err = tls.tls_run("queryOffset", "-t", TOPIC, "-g", GROUP, "--json")
    assert [q["consumer_offset"] for q in json.loads(out)["queues"]] == [0] * QUEUES
    code, _, err = tls.tls_run("restoreOffset", "--from", str(backup), "--yes")
    assert code == 0, err
    code, out, err = tls.tls_run("queryOffset", "-t", TOPIC, "-g", GROUP, "--json")
    assert [q["consumer_offset"] for q in json.loads(out)["queues"]] == [COMMITTED] * QUEUES


def test_plaintext(tls: Tls) -> None:
    """Enforcing: one clear line, exit 1.  Permissive: plaintext works as well."""
    code, out, err = tls.run("queryOffset", "-t", TOPIC, "-g", GROUP, "--json")
    if tls.mode == "permissive":
        assert code == 0, err
        assert [q["consumer_offset"] for q in json.loads(out)["queues"]] == [COMMITTED] * QUEUES
        return
    assert code == 1, (out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "--tls" in lines[0], err


def test_a_certificate_we_do_not_trust_is_refused(tls: Tls) -> None:
    """--tls alone checks the system trust store, which does not know our self-signed cert."""
    code, out, err = tls.run("queryOffset", "-t", TOPIC, "-g", GROUP, "--tls")
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "certificate" in lines[0].lower(), err


def test_java_tool_over_tls_agrees(tls: Tls) -> None:
    java = tls.cluster.mqadmin("consumerProgress", "-g", GROUP).stdout
    rows = {
        int(cells[2]): (int(cells[3]), int(cells[4]))
        for cells in (line.split() for line in java.splitlines())
        if cells[:2] == [TOPIC, "broker-a"]
    }
    assert rows == {q: (PER_QUEUE, COMMITTED) for q in range(QUEUES)}, java

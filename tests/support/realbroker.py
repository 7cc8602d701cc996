"""Run a real Apache RocketMQ namesrv + broker(s) and the Java mqadmin tool on loopback.

The jars come from Maven Central through the ordinary ``mvn`` client and are cached per
version, so only the first run needs the network.  Everything here is stdlib-only so it can
be imported from pytest fixtures, from benchmarks, or run as a script::

    python tests/support/realbroker.py fetch 5.3.3
    python tests/support/realbroker.py start 5.3.3 [--brokers 2] [--proxy] [--workdir DIR]

``--proxy`` (5.x) also starts a ``rocketmq-proxy`` in cluster mode (:class:`RealProxy`) for
the gRPC clients of apache/rocketmq-clients; its jars resolve into ``<version>-proxy``.

Things learnt by running it (JDK 17, 2 cores):

* 4.9.8's namesrv/broker/filter jars are not on Central, so 4.x means 4.9.7, the newest
  complete 4.x release there.  5.3.4 is only partly there, so 5.x means 5.3.3.
* 5.3.3 may print its boot line before it registered (its first registration can go to an
  empty "available namesrv" list); the periodic one follows 10 s later.  Readiness
  therefore asks the namesrv instead of trusting the line.
* Both versions fail GET_BROKER_RUNTIME_INFO for the first moments after boot, which
  makes ``clusterList`` print blank columns; readiness waits for that too.
* Java mqadmin needs 3.5-4 s per call, ~3 s of it in its client shutdown.
* Central serves 5.5.1 only for broker, store, common, remoting, tiered-store and controller;
  a "5.5.1" cluster therefore runs them with the 5.5.0 name server, tool and client (see
  :data:`SPLIT_RELEASES`).  A 5.5.1 broker may log boot success ~10 s before its first
  registration completes; readiness waits for its "registration completed" line.
* That 5.5.1 broker cannot run the 5.x auth model (no rocketmq-auth 5.5.1 on Central; see
  :data:`AUTH_VERSIONS`); its proxy is the 5.5.0 release's (:class:`RealProxy`).
* A 5.x slave given ``haMasterAddress`` never connects to its master; left unset it takes the
  address from its name-server registration.  It serves no pulls unless ``slaveReadEnable``.

Environment overrides:

* ``MQADMIN_RMQ_CACHE``: root of the jar cache (default ``<repo>/.venv/rocketmq``); each
  version lives in ``<root>/<version>/lib``.
* ``MQADMIN_RMQ_JAVA``: the ``java`` binary (default: ``java`` on PATH, which should be 17).
* ``MQADMIN_RMQ_MVN``: the ``mvn`` binary (default: ``mvn`` on PATH).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import dataclasses
import fcntl
import hashlib
import hmac
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

# 5.3.4 is only partly on Maven Central (no client, remoting, tools, srvutil jars), so the
# newest complete 5.3 is 5.3.3.  5.5.1 is partly there too; see SPLIT_RELEASES.
VERSIONS: tuple[str, ...] = ("4.9.7", "5.3.3")

#: the versions the offset commands are held to (the newest line costs one broker set per module)
OFFSET_VERSIONS: tuple[str, ...] = (*VERSIONS, "5.5.1")

#: MQADMIN_RMQ_EXTRA_VERSIONS=1: also the variants the default suite leaves out to stay inside its
#: time budget (each one passed when added): the 5.3.3 proxy, a 5.5.1 master + slave
EXTRA_VERSIONS = bool(os.environ.get("MQADMIN_RMQ_EXTRA_VERSIONS"))

#: the versions the ACL tests run: 4.x plain ACL, 5.x authentication/authorization.  The 5.5
#: line runs as 5.5.0: Central has no rocketmq-auth 5.5.1, and the 5.5.1 broker calls an
#: ``AuthorizationEvaluator.evaluate`` that 5.5.0's lacks (NoSuchMethodError on every request
#: once authorization is on), so a 5.5.1 broker built from Central cannot run the auth model.
AUTH_VERSIONS: tuple[str, ...] = (*VERSIONS, "5.5.0")

#: split releases whose mixed classpath breaks the 5.x auth model (see AUTH_VERSIONS)
_NO_AUTH_RELEASES = frozenset(("5.5.1",))

#: broker.conf variants people run on 5.x that change where offsets and metadata live
BROKER_VARIANTS: dict[str, dict[str, object]] = {
    "file": {},
    "rocksdb-store": {"storeType": "defaultRocksDB"},
    "v2-metadata": {"configManagerVersion": "v2"},
}

# Releases Central serves only in part: the version that fills in the modules it lacks, and
# the modules it serves.  A "5.5.1" cluster is what people run: the 5.5.1 broker (and the
# store, common and remoting it brings) with the 5.5.0 name server, Java tool and client.
SPLIT_RELEASES: dict[str, tuple[str, frozenset[str]]] = {
    "5.5.1": (
        "5.5.0",
        frozenset(
            (
                "rocketmq-broker",
                "rocketmq-store",
                "rocketmq-common",
                "rocketmq-remoting",
                "rocketmq-tiered-store",
                "rocketmq-controller",
            )
        ),
    ),
}
# Every module of the rocketmq build a runtime closure can reach; pinned for split releases.
_MODULES = (
    "rocketmq-acl",
    "rocketmq-auth",
    "rocketmq-broker",
    "rocketmq-client",
    "rocketmq-common",
    "rocketmq-container",
    "rocketmq-controller",
    "rocketmq-filter",
    "rocketmq-logging",
    "rocketmq-namesrv",
    "rocketmq-proxy",
    "rocketmq-remoting",
    "rocketmq-srvutil",
    "rocketmq-store",
    "rocketmq-tiered-store",
    "rocketmq-tools",
)

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
START_TIMEOUT = 60.0
#: the 5.5 proxy loads far more than a broker before it listens: ~50 s on a loaded two-core box
PROXY_START_TIMEOUT = 120.0
# A 5.3.3 broker spends 10-20 s in its shutdown hook here (service threads are joined one
# after another, each waiting out its poll interval), so allow more than the usual 30 s.
STOP_TIMEOUT = 45.0
POLL_CALL_TIMEOUT = 2.0
DEFAULT_CLUSTER = "TestCluster"

#: what a 5.x broker logs once a registration reached the name server (BrokerController.java)
REGISTERED_LINE = "Registering current broker to name server completed"

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"

# Variables that would silently redirect or reconfigure a child JVM.
_SCRUBBED_ENV = (
    "NAMESRV_ADDR",
    "RMQ_PROXY_HOME",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
)

# 4.9.8 frees mapped files by reflection into JDK internals; without these its shutdown
# hook dies with InaccessibleObjectException and leaves the abort file (checked on this
# machine).  5.3.3 stops cleanly without them; they are harmless there.
_JDK9_MODULE_FLAGS = (
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
)


# --------------------------------------------------------------------------------------
# Jar resolution
# --------------------------------------------------------------------------------------


def is_v4(version: str) -> bool:
    """4.x and 5.x differ in logging, config keys and a few outputs."""
    return version.startswith("4.")


def cache_root() -> Path:
    """Where per-version lib dirs live; under .venv so it is never committed."""
    env = os.environ.get("MQADMIN_RMQ_CACHE")
    return Path(env).expanduser().resolve() if env else REPO_ROOT / ".venv" / "rocketmq"


_ARTIFACTS = ("rocketmq-namesrv", "rocketmq-broker", "rocketmq-tools", "rocketmq-client")
# The 5.x proxy resolves into a lib dir of its own (``<version>-proxy``), so adding it never
# invalidates a cache that already holds the servers and tools.
PROXY_COMPONENT = "proxy"
_COMPONENT_ARTIFACTS = {"": _ARTIFACTS, PROXY_COMPONENT: ("rocketmq-proxy",)}


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def module_version(version: str, artifact: str) -> str:
    """The version of one module in a ``version`` cluster (see :data:`SPLIT_RELEASES`)."""
    fill, served = SPLIT_RELEASES.get(version, (version, frozenset()))
    return version if artifact in served else fill


def _pom_text(version: str, artifacts: tuple[str, ...] = _ARTIFACTS) -> str:
    """A throwaway pom whose runtime closure equals the binary distribution's lib/.

    Up to 5.3.3 the module poms inherit versions from ``rocketmq-all``, imported here as a
    BOM.  From 5.3.4 on the published poms are flattened (explicit versions, no parent) and
    ``rocketmq-all`` is no longer on Central, so importing it would fail.  A split release
    pins every module to the version Central serves it at.
    """
    bom = ""
    if version in SPLIT_RELEASES:
        pins = "".join(
            f"<dependency><groupId>org.apache.rocketmq</groupId><artifactId>{m}</artifactId>"
            f"<version>{module_version(version, m)}</version></dependency>\n"
            for m in _MODULES
        )
        bom = f"<dependencyManagement><dependencies>\n{pins}</dependencies></dependencyManagement>\n"
    elif _version_tuple(version) < (5, 3, 4):
        bom = f"""<dependencyManagement><dependencies><dependency>
<groupId>org.apache.rocketmq</groupId><artifactId>rocketmq-all</artifactId><version>{version}</version>
<type>pom</type><scope>import</scope>
</dependency></dependencies></dependencyManagement>
"""
    deps = "".join(
        f"<dependency><groupId>org.apache.rocketmq</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{module_version(version, artifact)}</version></dependency>\n"
        for artifact in artifacts
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
<modelVersion>4.0.0</modelVersion>
<groupId>local.mqadmin.test</groupId><artifactId>rmq-runtime-{version}</artifactId><version>1</version>
<packaging>pom</packaging>
{bom}<dependencies>
{deps}</dependencies>
</project>
"""


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialise concurrent resolvers (e.g. pytest-xdist workers) of one version."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_dist(version: str, component: str = "") -> Path:
    """Return a lib dir holding namesrv, broker, tools and client jars for ``version``
    (with ``component="proxy"``: the rocketmq-proxy jar and its runtime closure).

    Resolved once with ``mvn`` and cached behind a marker file; a failure raises with
    Maven's last lines, because a real-broker test must never be skipped quietly.
    """
    artifacts = _COMPONENT_ARTIFACTS[component]
    base = cache_root() / (f"{version}-{component}" if component else version)
    lib = base / "lib"
    marker = base / ".complete"
    if marker.is_file() and lib.is_dir():
        return lib
    with _file_lock(base / ".lock"):
        if marker.is_file() and lib.is_dir():
            return lib
        mvn = os.environ.get("MQADMIN_RMQ_MVN") or shutil.which("mvn")
        if not mvn:
            raise RuntimeError("mvn not found on PATH; needed to fetch RocketMQ jars")
        pom = base / "pom.xml"
        pom.write_text(_pom_text(version, artifacts))
        staging = base / "lib.partial"
        shutil.rmtree(staging, ignore_errors=True)
        cmd = [
            mvn,
            "-B",
            "-q",
            "-Dstyle.color=never",
            "-f",
            str(pom),
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
            "-Dmdep.prependGroupId=true",
        ]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=1800, env=_child_env(), cwd=base, stdin=subprocess.DEVNULL
        )
        jars = sorted(staging.glob("*.jar")) if staging.is_dir() else []
        if proc.returncode != 0 or not jars:
            text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # -B keeps some colour
            tail = "\n".join(text.strip().splitlines()[-25:])
            what = " ".join(artifacts)
            raise RuntimeError(f"Maven could not resolve RocketMQ {version} {what} (exit {proc.returncode}):\n{tail}")
        shutil.rmtree(lib, ignore_errors=True)
        staging.rename(lib)
        marker.write_text("".join(f"{jar.name}\n" for jar in jars))
    return lib


# --------------------------------------------------------------------------------------
# JVM plumbing
# --------------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    """Environment without anything that changes where or how RocketMQ JVMs talk."""
    return {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV and not k.startswith("ROCKETMQ_")}


def java_binary() -> str:
    java = os.environ.get("MQADMIN_RMQ_JAVA") or shutil.which("java")
    if not java:
        raise RuntimeError("java not found on PATH (JDK 17 expected)")
    return java


_java_major_cache: dict[str, int] = {}


def java_major(java: str) -> int:
    """Feature version of ``java``; module flags only exist from 9 on."""
    if java not in _java_major_cache:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, env=_child_env()).stderr
        m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
        if not m:
            raise RuntimeError(f"cannot parse `java -version`: {out!r}")
        major = int(m.group(1))
        _java_major_cache[java] = int(m.group(2)) if major == 1 and m.group(2) else major
    return _java_major_cache[java]


def _logback_xml(root_level: str) -> str:
    """One config for both versions; 5.x's shaded loader needs double-quoted class names."""
    return f"""<configuration>
  <appender name="F" class="ch.qos.logback.core.FileAppender">
    <file>${{rmq.test.log}}</file>
    <encoder class="ch.qos.logback.classic.encoder.PatternLayoutEncoder">
      <pattern>%d{{HH:mm:ss.SSS}} %-5p [%t] %c - %m%n</pattern>
    </encoder>
  </appender>
  <appender name="O" class="ch.qos.logback.core.ConsoleAppender">
    <encoder class="ch.qos.logback.classic.encoder.PatternLayoutEncoder"><pattern>%m%n</pattern></encoder>
  </appender>
  <logger name="RocketmqConsole" level="INFO" additivity="false"><appender-ref ref="O"/></logger>
  <logger name="RocketmqNamesrvConsole" level="INFO" additivity="false"><appender-ref ref="O"/></logger>
  <root level="{root_level}"><appender-ref ref="F"/></root>
</configuration>
"""


def _prepare_home(workdir: Path) -> Path:
    """A fake ROCKETMQ_HOME: 4.9.8 loads logback configs from <home>/conf by path.

    No tools.yml on purpose: its presence would make mqadmin sign every request.
    """
    home = workdir / "rmq-home"
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for role, level in (("namesrv", "INFO"), ("broker", "INFO"), ("proxy", "INFO"), ("tools", "WARN")):
        path = conf / f"logback_{role}.xml"
        if not path.exists():
            path.write_text(_logback_xml(level))
    (workdir / "logs").mkdir(exist_ok=True)
    return home


def _jvm_command(
    version: str,
    role: str,
    workdir: Path,
    heap: tuple[str, ...],
    main: str,
    args: list[str],
    *,
    log_name: str,
    props: Mapping[str, str] | None = None,
    component: str = "",
) -> list[str]:
    """Full java command line for one RocketMQ process with everything under workdir.

    ``props`` are extra system properties (e.g. ``tls.*``); they come after the defaults and
    so win (the JVM keeps the last ``-D`` of a name).  ``component`` picks the lib dir
    (see :func:`ensure_dist`).
    """
    java = java_binary()
    lib = ensure_dist(version, component)
    home = _prepare_home(workdir)
    cmd = [java, *heap, "-XX:+UseSerialGC", "-XX:ActiveProcessorCount=2", "-XX:-OmitStackTraceInFastThrow"]
    if role != "tools" and java_major(java) >= 9:
        cmd += _JDK9_MODULE_FLAGS
    if role == "tools":
        cmd.append("-XX:TieredStopAtLevel=1")  # short-lived: C1 only starts faster
    cmd += [
        f"-Duser.home={workdir}",
        f"-Drocketmq.home.dir={home}",
        f"-Drmq.test.log={workdir / 'logs' / log_name}",
        f"-Drocketmq.client.logRoot={workdir / 'logs'}",
        "-Dtls.server.mode=disabled",
        # 4.9.8 refuses writes when the disk is >90 % used; relax it for busy dev machines.
        "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99",
        "-Drocketmq.broker.diskSpaceCleanForciblyRatio=0.98",
    ]
    if not is_v4(version):
        # Without this every 5.x process on the merged classpath picks the broker's config.
        cmd.append(f"-Drmq.logback.configurationFile={home / 'conf' / f'logback_{role}.xml'}")
    cmd += [f"-D{k}={v}" for k, v in (props or {}).items()]
    cmd += ["-cp", f"{lib}/*", main, *args]
    return cmd


# --------------------------------------------------------------------------------------
# Java mqadmin
# --------------------------------------------------------------------------------------


class MQAdminError(RuntimeError):
    """Java mqadmin reported a failure (it exits 0 on most of them)."""


_TOOL_LOCK = threading.Lock()


def tool_runs_serial(version: str) -> bool:
    """The 5.5 tool loads many more classes: four at once on two cores ran past a minute here,
    so :func:`java_mqadmin` runs it one call at a time."""
    return _version_tuple(version) >= (5, 4)


def java_mqadmin(
    version: str,
    namesrv_addr: str | None,
    *args: str,
    workdir: str | Path,
    timeout: float = 60,
    props: Mapping[str, str] | None = None,
    credentials: tuple[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one Java mqadmin subcommand; ``-n namesrv_addr`` is appended when given.

    Its exit code says little (RPC failures exit 0), so see :func:`check_java_mqadmin`.
    ``credentials`` (access key, secret key) go into a ``tools.yml`` of a home of their own
    under ``workdir``, which is how the Java tool is given ACL keys; ``props`` are extra
    system properties (``tls.enable`` ...). Runs of a 5.4+ tool wait for each other.
    """
    workdir = Path(workdir).resolve()
    if credentials is not None:
        workdir = workdir / f"keys-{credentials[0]}"
    workdir.mkdir(parents=True, exist_ok=True)
    if credentials is not None:
        tools_yml = _prepare_home(workdir) / "conf" / "tools.yml"
        tools_yml.write_text(f"accessKey: {credentials[0]}\nsecretKey: {credentials[1]}\n")
    argv = list(args) + (["-n", namesrv_addr] if namesrv_addr else [])
    cmd = _jvm_command(
        version, "tools", workdir, ("-Xms32m", "-Xmx128m"), MQADMIN_MAIN, argv, log_name="mqadmin.log", props=props
    )
    with _TOOL_LOCK if tool_runs_serial(version) else contextlib.nullcontext():
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_child_env(),
            cwd=workdir,
            stdin=subprocess.DEVNULL,
        )


# An exception line, optionally one more line (5.x adds a FAQ link), then a frame.
_STACK_TRACE = re.compile(r"(?:Exception|Error)\b[^\n]*\n(?:[^\n]*\n)?\s+at \S+\(")


def check_java_mqadmin(
    version: str,
    namesrv_addr: str | None,
    *args: str,
    workdir: str | Path,
    timeout: float = 60,
    props: Mapping[str, str] | None = None,
    credentials: tuple[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Like :func:`java_mqadmin` but raise MQAdminError on a stack trace, usage or bad exit."""
    proc = java_mqadmin(
        version, namesrv_addr, *args, workdir=workdir, timeout=timeout, props=props, credentials=credentials
    )
    problem = None
    if proc.returncode != 0:
        problem = f"exit code {proc.returncode}"
    elif _STACK_TRACE.search(proc.stderr) or _STACK_TRACE.search(proc.stdout):
        problem = "exception stack trace"
    elif "sub command" in proc.stdout and "not exist" in proc.stdout:
        problem = "unknown subcommand"
    if problem:
        raise MQAdminError(
            f"mqadmin {' '.join(args)} failed ({problem})\n"
            f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
        )
    return proc


# --------------------------------------------------------------------------------------
# Minimal remoting client (JSON frames), used for readiness and for test set-up
# --------------------------------------------------------------------------------------

GET_BROKER_RUNTIME_INFO = 28
GET_BROKER_CLUSTER_INFO = 106
UPDATE_CONSUMER_OFFSET = 15
QUERY_CONSUMER_OFFSET = 14

_opaque = itertools.count(1)
_NUMERIC_KEY = re.compile(r"([{,]\s*)(-?\d+)(\s*:)")


def parse_fastjson(body: bytes) -> Any:
    """Parse fastjson output, which writes integer map keys without quotes."""
    return json.loads(_NUMERIC_KEY.sub(r'\1"\2"\3', body.decode("utf-8")))


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed mid-frame")
        buf += chunk
    return bytes(buf)


Credentials = tuple[str, str]  # (access key, secret key)


def sign_fields(fields: dict[str, str], body: bytes, credentials: Credentials) -> dict[str, str]:
    """ACL signature (4.x plain ACL and 5.x auth alike): HMAC-SHA1 over the sorted values + body.

    Kept here, stdlib only, so the harness does not lean on the code under test.
    """
    signed = {**fields, "AccessKey": credentials[0]}
    content = "".join(signed[k] for k in sorted(signed)).encode() + body
    digest = hmac.new(credentials[1].encode(), content, hashlib.sha1).digest()
    return {**signed, "Signature": base64.b64encode(digest).decode()}


def remoting_call(
    addr: str,
    code: int,
    ext_fields: Mapping[str, object] | None = None,
    body: bytes = b"",
    timeout: float = 5.0,
    *,
    credentials: Credentials | None = None,
    tls: ssl.SSLContext | None = None,
) -> tuple[dict[str, Any], bytes]:
    """Send one JSON-header request and return (response header, body).

    Just enough protocol for the harness itself; the product code has the real client.
    ``credentials`` sign the request (ACL clusters); ``tls`` wraps the connection.
    """
    header: dict[str, Any] = {
        "code": code,
        "flag": 0,
        "language": "JAVA",
        "opaque": next(_opaque) & 0x7FFFFFFF,
        "serializeTypeCurrentRPC": "JSON",
        "version": 399,
    }
    fields = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in (ext_fields or {}).items()}
    if credentials is not None:
        fields = sign_fields(fields, body, credentials)
    if fields:
        header["extFields"] = fields
    raw = json.dumps(header, separators=(",", ":")).encode()
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as plain:
        sock = tls.wrap_socket(plain) if tls is not None else plain
        sock.sendall(struct.pack(">II", 4 + len(raw) + len(body), len(raw)) + raw + body)
        (length,) = struct.unpack(">I", _read_exact(sock, 4))
        frame = _read_exact(sock, length)
    (word,) = struct.unpack(">I", frame[:4])
    if word >> 24 != 0:
        raise RuntimeError(f"unexpected non-JSON reply (serialize type {word >> 24})")
    hlen = word & 0xFFFFFF
    return json.loads(frame[4 : 4 + hlen]), frame[4 + hlen :]


def cluster_info(namesrv_addr: str, timeout: float = 5.0, *, tls: ssl.SSLContext | None = None) -> dict[str, Any]:
    """GET_BROKER_CLUSTER_INFO as a dict (broker ids become string keys)."""
    head, body = remoting_call(namesrv_addr, GET_BROKER_CLUSTER_INFO, timeout=timeout, tls=tls)
    if head.get("code") != 0:
        raise RuntimeError(f"GET_BROKER_CLUSTER_INFO failed: {head}")
    return parse_fastjson(body) if body else {}


UPDATE_AND_CREATE_TOPIC = 17
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200


def create_topic(
    broker_addr: str,
    topic: str,
    queues: int = 4,
    *,
    credentials: Credentials | None = None,
    tls: ssl.SSLContext | None = None,
    attributes: str | None = None,
) -> None:
    """UPDATE_AND_CREATE_TOPIC on one broker: what Java ``updateTopic`` sends, without a JVM.

    Works on the mock server too. The broker pushes the new route to the name server at once.
    ``attributes``: 5.x topic attributes, e.g. ``+message.type=LITE`` (a lite parent topic)."""
    fields: dict[str, object] = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }
    if attributes:
        fields["attributes"] = attributes
    head, _ = remoting_call(
        broker_addr,
        UPDATE_AND_CREATE_TOPIC,
        fields,
        credentials=credentials,
        tls=tls,
    )
    if head.get("code") != 0:
        raise RuntimeError(f"UPDATE_AND_CREATE_TOPIC {topic} failed: {head}")


def create_group(
    broker_addr: str,
    group: str,
    *,
    credentials: Credentials | None = None,
    tls: ssl.SSLContext | None = None,
    attributes: Mapping[str, str] | None = None,
) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: 5.3.x refuses offset commits of unknown groups.

    ``attributes``: 5.x group attributes, e.g. ``{"+lite.bind.topic": parent}`` (a lite group)."""
    body: dict[str, object] = {
        "groupName": group,
        "consumeEnable": True,
        "consumeBroadcastEnable": True,
        "retryQueueNums": 1,
        "retryMaxTimes": 16,
        "brokerId": 0,
    }
    if attributes:
        body["attributes"] = dict(attributes)
    head, _ = remoting_call(
        broker_addr,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        body=json.dumps(body).encode(),
        credentials=credentials,
        tls=tls,
    )
    if head.get("code") != 0:
        raise RuntimeError(f"UPDATE_AND_CREATE_SUBSCRIPTIONGROUP {group} failed: {head}")


UPDATE_BROKER_CONFIG = 25


def update_broker_config(
    broker_addr: str, props: Mapping[str, object], *, credentials: Credentials | None = None
) -> None:
    """UPDATE_BROKER_CONFIG: change settings of a running broker (as ``updateBrokerConfig`` does);
    BrokerConfig fields such as ``useServerSideResetOffset`` take effect at once."""
    text = "".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in props.items())
    head, _ = remoting_call(broker_addr, UPDATE_BROKER_CONFIG, body=text.encode(), credentials=credentials)
    if head.get("code") != 0:
        raise RuntimeError(f"UPDATE_BROKER_CONFIG {dict(props)} failed: {head}")


def commit_offset(
    broker_addr: str,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    *,
    credentials: Credentials | None = None,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Commit a consumer offset on a broker, as a consumer would, without a Java client."""
    head, _ = remoting_call(
        broker_addr,
        UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset},
        credentials=credentials,
        tls=tls,
    )
    if head.get("code") != 0:
        raise RuntimeError(f"UPDATE_CONSUMER_OFFSET failed: {head}")


AUTH_CREATE_USER = 3001
AUTH_CREATE_ACL = 3006


def create_user(
    broker_addr: str,
    username: str,
    password: str,
    *,
    credentials: Credentials,
    user_type: str = "Normal",
    tls: ssl.SSLContext | None = None,
) -> None:
    """5.x auth: create a user (what Java ``createUser`` sends); needs a Super user's keys."""
    body = {"username": username, "password": password, "userType": user_type, "userStatus": "enable"}
    head, _ = remoting_call(
        broker_addr,
        AUTH_CREATE_USER,
        {"username": username},
        json.dumps(body).encode(),
        credentials=credentials,
        tls=tls,
    )
    if head.get("code") != 0:
        raise RuntimeError(f"AUTH_CREATE_USER {username} failed: {head}")


def create_acl(
    broker_addr: str,
    username: str,
    grants: Mapping[str, tuple[str, ...]],
    *,
    credentials: Credentials,
    tls: ssl.SSLContext | None = None,
) -> None:
    """5.x auth: allow ``username`` the actions per resource, e.g. ``{"Topic:T": ("Pub", "Sub")}``."""
    subject = f"User:{username}"
    entries = [
        {"resource": resource, "actions": list(actions), "sourceIps": [], "decision": "Allow"}
        for resource, actions in grants.items()
    ]
    body = {"subject": subject, "policies": [{"policyType": "Custom", "entries": entries}]}
    head, _ = remoting_call(
        broker_addr,
        AUTH_CREATE_ACL,
        {"subject": subject},
        json.dumps(body).encode(),
        credentials=credentials,
        tls=tls,
    )
    if head.get("code") != 0:
        raise RuntimeError(f"AUTH_CREATE_ACL {subject} failed: {head}")


def plain_acl_yaml(accounts: Mapping[str, Mapping[str, object]]) -> str:
    """4.x ``plain_acl.yml`` text; ``accounts`` maps access key to its settings (secretKey, admin,
    defaultTopicPerm, defaultGroupPerm, topicPerms, groupPerms)."""
    lines = ["globalWhiteRemoteAddresses: []", "accounts:"]
    for key, settings in accounts.items():
        lines.append(f"  - accessKey: {key}")
        for name, value in settings.items():
            if isinstance(value, (list, tuple)):
                lines.append(f"    {name}:")
                lines += [f"      - {json.dumps(str(item))}" for item in value]  # '%RETRY%' needs quotes
            else:
                lines.append(f"    {name}: {str(value).lower() if isinstance(value, bool) else value}")
    return "\n".join(lines) + "\n"


def auth_broker_conf(admin: Credentials) -> dict[str, object]:
    """5.x broker settings for the auth model with ``admin`` as the initial Super user.

    The broker creates that user at boot (``initAuthenticationUser``) and uses the same keys
    for its own calls to other brokers (``innerClientAuthenticationCredentials``).
    """
    pkg = "org.apache.rocketmq.auth"
    return {
        "authenticationEnabled": True,
        "authorizationEnabled": True,
        "authenticationProvider": f"{pkg}.authentication.provider.DefaultAuthenticationProvider",
        "authorizationProvider": f"{pkg}.authorization.provider.DefaultAuthorizationProvider",
        "authenticationMetadataProvider": f"{pkg}.authentication.provider.LocalAuthenticationMetadataProvider",
        "authorizationMetadataProvider": f"{pkg}.authorization.provider.LocalAuthorizationMetadataProvider",
        "initAuthenticationUser": json.dumps({"username": admin[0], "password": admin[1]}, separators=(",", ":")),
        "innerClientAuthenticationCredentials": json.dumps(
            {"accessKey": admin[0], "secretKey": admin[1]}, separators=(",", ":")
        ),
    }


def make_tls_files(directory: Path, cn: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate (also its own CA) and its PKCS#8 key, made with ``openssl``."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    openssl = shutil.which("openssl")
    if not openssl:
        raise RuntimeError("openssl not found on PATH; needed to make a test certificate")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={cn}"]
        + ["-addext", f"subjectAltName=IP:{cn}", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def tls_server_props(mode: str, cert: Path, key: Path) -> dict[str, str]:
    """System properties for namesrv and broker serving TLS with our certificate.

    ``mode`` is ``enforcing`` or ``permissive``; the broker's own client (registration with the
    namesrv) speaks TLS too, trusting the same certificate.
    """
    return {
        "tls.server.mode": mode,
        "tls.test.mode.enable": "false",
        "tls.server.need.client.auth": "none",
        "tls.server.certPath": str(cert),
        "tls.server.keyPath": str(key),
        "tls.enable": "true",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(cert),
    }


def tls_client_props(cert: Path) -> dict[str, str]:
    """System properties for the Java tool to talk TLS to brokers that present ``cert``."""
    return {
        "tls.enable": "true",
        "tls.test.mode.enable": "false",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(cert),
    }


# --------------------------------------------------------------------------------------
# Ports
# --------------------------------------------------------------------------------------


def _port_free(port: int) -> bool:
    """True if nothing listens on ``port`` on any interface (HA and 4.9.8 bind wildcard)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Netty does
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _port_candidates() -> Iterator[int]:
    """Random ports below the ephemeral range, so outgoing connections cannot steal them."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    lo, hi = (10000, low - 1) if low > 12000 else (low, 65000)
    while True:
        yield random.randint(lo, hi)


def pick_port_block(below: int = 0, above: int = 0, taken: set[int] | None = None) -> int:
    """A port P such that P-below..P+above are all free and not already handed out."""
    taken = taken if taken is not None else set()
    for port in itertools.islice(_port_candidates(), 500):
        block = range(port - below, port + above + 1)
        if any(p in taken for p in block):
            continue
        if all(_port_free(p) for p in block):
            taken.update(block)
            return port
    raise RuntimeError("no free loopback port block found")


# --------------------------------------------------------------------------------------
# Processes and the cluster
# --------------------------------------------------------------------------------------


class ProcessStartError(RuntimeError):
    """A RocketMQ JVM died or never became ready; the message carries its log tail."""

    def __init__(self, message: str, bind_conflict: bool = False) -> None:
        super().__init__(message)
        self.bind_conflict = bind_conflict


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def _poll(proc: _JavaProcess, deadline: float, what: str, check: Callable[[], bool]) -> None:
    """Retry ``check`` until true; network hiccups count as 'not yet'."""
    while True:
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            if check():
                return
        if proc.proc.poll() is not None:
            raise proc.failure(f"exited with {proc.proc.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise proc.failure(f"timed out waiting for {what}")
        time.sleep(0.2)


class _JavaProcess:
    """One server JVM with its stdout/stderr captured into ``<name>.out``."""

    def __init__(self, name: str, cmd: list[str], workdir: Path, log: Path) -> None:
        self.name = name
        self.out = workdir / "logs" / f"{name}.out"
        self.log = log
        # the log file is appended to across restarts: this run's lines start here
        self.log_start = log.stat().st_size if log.exists() else 0
        self._fh = open(self.out, "wb")  # a retry must not see the previous attempt's output
        # Own session: Ctrl-C in a terminal must not reach the JVMs before the harness
        # stops them in order.  setpriv's pdeathsig ends orphans if Python itself is killed
        # (only from the main thread: the signal fires when the forking *thread* exits).
        prefix: list[str] = []
        setpriv = shutil.which("setpriv")
        if setpriv and threading.current_thread() is threading.main_thread():
            prefix = [setpriv, "--pdeathsig", "TERM", "--"]
        self.proc = subprocess.Popen(
            prefix + cmd,
            stdout=self._fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=workdir,
            env=_child_env(),
            start_new_session=True,
        )
        self.started = time.monotonic()

    def output(self) -> str:
        try:
            return self.out.read_text(errors="replace")
        except OSError:
            return ""

    def log_text(self) -> str:
        """This run's part of the process's own log file."""
        try:
            with open(self.log, "rb") as fh:
                fh.seek(self.log_start)
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def failure(self, what: str) -> ProcessStartError:
        text = self.output() + "\n" + (_tail(self.log, 200) if self.log.exists() else "")
        conflict = "Address already in use" in text or "BindException" in text
        return ProcessStartError(
            f"{self.name}: {what}\n--- {self.out} ---\n{_tail(self.out)}\n--- {self.log} ---\n{_tail(self.log, 20)}",
            bind_conflict=conflict,
        )

    def wait_for_line(self, needle: str, deadline: float) -> str:
        """Block until stdout has a line containing ``needle``; fail fast if the JVM exits."""
        while True:
            for line in self.output().splitlines():
                if needle in line:
                    return line
            if self.proc.poll() is not None:
                raise self.failure(f"exited with {self.proc.returncode} before '{needle}'")
            if time.monotonic() > deadline:
                raise self.failure(f"no '{needle}' within {START_TIMEOUT:.0f}s")
            time.sleep(0.1)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)

    def wait_or_kill(self, timeout: float) -> bool:
        """Wait for a graceful exit; SIGKILL after ``timeout``.  True if it exited by itself."""
        try:
            self.proc.wait(timeout=timeout)
            clean = True
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            clean = False
        self._fh.close()
        return clean


_LIVE: set[RealCluster | RealProxy] = set()


@atexit.register
def _stop_leftovers() -> None:
    """Never leave JVMs behind when a caller forgot to stop a cluster (proxies go first)."""
    for running in sorted(_LIVE, key=lambda item: not isinstance(item, RealProxy)):
        with contextlib.suppress(Exception):
            running.stop(check=False)


@dataclasses.dataclass
class _Node:
    """One broker JVM: a master (broker_id 0) or a slave (broker_id 1) of ``name``."""

    index: int
    name: str
    broker_id: int
    store: Path
    proc: _JavaProcess | None = None
    port: int = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def label(self) -> str:
        return self.name if self.broker_id == 0 else f"{self.name}-slave"


class RealCluster:
    """A namesrv plus ``brokers`` master brokers of one RocketMQ version, all on loopback.

    Every file (configs, stores, logs, user.home) lives under ``workdir`` so tests can
    inspect the stores after :meth:`stop`.  ``server_side_reset`` sets 5.x's
    ``useServerSideResetOffset`` (None keeps the broker default, true on 5.3.3); 4.x always
    pushes resets to clients, so only None/False are accepted there.  ``extra_broker_conf``
    entries are written last into every broker's properties file and win; ``broker_conf``
    (broker name -> entries) then into that broker's only, so one cluster can run a variant
    per broker.

    Topologies people run:

    * ``credentials`` (access key, secret key): the admin account; the harness signs its own
      calls with it.  With ``plain_acl`` (4.x ``plain_acl.yml`` text, see :func:`plain_acl_yaml`)
      the brokers run ``aclEnable=true``; with ``auth=True`` (5.x) they run the authentication
      and authorization model with that account as the initial Super user (then add users with
      :meth:`create_user` / :meth:`create_acl`).
    * ``jvm_props`` (e.g. :func:`tls_server_props`) go to namesrv and brokers, ``tool_props``
      (e.g. :func:`tls_client_props`) to the Java tool; ``tls`` is the context the harness
      itself connects with.
    * ``slaves=True`` gives every master a ``SLAVE`` (brokerId 1); masters become ``ASYNC_MASTER``.
      :meth:`stop_broker` stops one node (e.g. the master) and leaves the rest running.
    """

    def __init__(
        self,
        version: str,
        workdir: str | Path,
        brokers: int = 1,
        server_side_reset: bool | None = None,
        extra_broker_conf: Mapping[str, object] | None = None,
        cluster_name: str = DEFAULT_CLUSTER,
        *,
        credentials: Credentials | None = None,
        plain_acl: str | None = None,
        auth: bool = False,
        jvm_props: Mapping[str, str] | None = None,
        tool_props: Mapping[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
        slaves: bool = False,
        broker_conf: Mapping[str, Mapping[str, object]] | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError("need at least one broker")
        if server_side_reset and is_v4(version):
            raise ValueError("4.x has no server-side offset reset (it always pushes to clients)")
        if (plain_acl is not None or auth) and credentials is None:
            raise ValueError("an ACL cluster needs the admin credentials")
        if plain_acl is not None and not is_v4(version):
            raise ValueError("plain_acl is the 4.x ACL; use auth=True on 5.x")
        if auth and is_v4(version):
            raise ValueError("auth=True is the 5.x model; use plain_acl on 4.x")
        if auth and version in _NO_AUTH_RELEASES:
            raise ValueError(f"{version} from Maven Central cannot run auth=True (no matching rocketmq-auth)")
        self.version = version
        self.workdir = Path(workdir).resolve()
        self.cluster_name = cluster_name
        self.broker_count = brokers
        self.server_side_reset = server_side_reset
        self.extra_broker_conf = dict(extra_broker_conf or {})
        self.broker_conf = {name: dict(conf) for name, conf in (broker_conf or {}).items()}
        self.credentials = credentials
        self.plain_acl = plain_acl
        self.auth = auth
        self.jvm_props = dict(jvm_props or {})
        self.tool_props = dict(tool_props or {})
        self.tls = tls
        self.broker_names = [f"broker-{chr(ord('a') + i)}" for i in range(brokers)]
        self.store_dirs = [self.workdir / name / "store" for name in self.broker_names]
        self._nodes = [
            _Node(i, name, 0, store)
            for i, (name, store) in enumerate(zip(self.broker_names, self.store_dirs, strict=True))
        ]
        if slaves:
            self._nodes += [
                _Node(i, name, 1, self.workdir / name / "store-slave") for i, name in enumerate(self.broker_names)
            ]
        self.namesrv_addr = ""
        self.brokers: list[tuple[str, str]] = []
        self.timings: dict[str, float] = {}
        self.unclean_stops: list[str] = []
        self._namesrv: _JavaProcess | None = None
        self._taken: set[int] = set()

    # -- context manager ---------------------------------------------------------------

    def __enter__(self) -> RealCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Don't mask the test's own exception with a stop complaint.
        self.stop(check=exc_type is None)

    # -- public API --------------------------------------------------------------------

    @property
    def broker_addrs(self) -> list[str]:
        return [addr for _, addr in self.brokers]

    @property
    def slaves(self) -> list[tuple[str, str]]:
        """(broker name, address) of every slave, as started."""
        return [(n.name, n.addr) for n in self._nodes if n.broker_id != 0]

    def consumer_offset_file(self, index: int = 0) -> Path:
        """The broker's persisted offset table (valid after a clean stop)."""
        return self.store_dirs[index] / "config" / "consumerOffset.json"

    def mqadmin(
        self, *args: str, check: bool = True, timeout: float = 60, credentials: Credentials | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Java mqadmin against this cluster's namesrv (unsigned unless ``credentials``)."""
        run = check_java_mqadmin if check else java_mqadmin
        return run(
            self.version,
            self.namesrv_addr,
            *args,
            workdir=self.workdir / "mqadmin",
            timeout=timeout,
            props=self.tool_props,
            credentials=credentials,
        )

    def call(
        self, addr: str, code: int, ext_fields: Mapping[str, object] | None = None, body: bytes = b""
    ) -> tuple[dict[str, Any], bytes]:
        """:func:`remoting_call` signed with the admin keys and over TLS as the cluster needs."""
        return remoting_call(addr, code, ext_fields, body, credentials=self.credentials, tls=self.tls)

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """The topic on every master (as ``updateTopic -c`` does)."""
        for addr in self.broker_addrs:
            create_topic(addr, topic, queues, credentials=self.credentials, tls=self.tls)

    def create_group(self, group: str) -> None:
        for addr in self.broker_addrs:
            create_group(addr, group, credentials=self.credentials, tls=self.tls)

    def commit_offset(self, broker_name: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        addr = dict(self.brokers)[broker_name]
        commit_offset(addr, group, topic, queue_id, offset, credentials=self.credentials, tls=self.tls)

    def create_user(self, username: str, password: str, grants: Mapping[str, tuple[str, ...]]) -> None:
        """5.x auth: a Normal user with exactly ``grants`` on every master."""
        assert self.credentials is not None, "needs an auth=True cluster"
        for addr in self.broker_addrs:
            create_user(addr, username, password, credentials=self.credentials, tls=self.tls)
            if grants:
                create_acl(addr, username, grants, credentials=self.credentials, tls=self.tls)

    def start(self) -> None:
        """Resolve jars, start namesrv and brokers, and wait until every broker is routed.

        May be called again after :meth:`stop` to restart on the same stores (the ports,
        and so ``namesrv_addr`` and ``brokers``, change).
        """
        if self._namesrv is not None:
            raise RuntimeError("cluster already started")
        t0 = time.monotonic()
        ensure_dist(self.version)
        self.timings["dist"] = time.monotonic() - t0
        self.workdir.mkdir(parents=True, exist_ok=True)
        home = _prepare_home(self.workdir)
        if self.plain_acl is not None:
            (home / "conf" / "plain_acl.yml").write_text(self.plain_acl)
        _LIVE.add(self)
        try:
            t1 = time.monotonic()
            self._start_namesrv()
            self.timings["namesrv"] = time.monotonic() - t1
            t2 = time.monotonic()
            self._start_brokers()
            self.timings["brokers"] = time.monotonic() - t2
        except BaseException:
            self.stop(check=False)
            raise
        self.timings["start"] = time.monotonic() - t0

    def stop_broker(self, broker_name: str, broker_id: int = 0) -> None:
        """Stop one broker JVM cleanly (it unregisters from the namesrv); the others keep running."""
        for node in self._nodes:
            if (node.name, node.broker_id) == (broker_name, broker_id) and node.proc is not None:
                node.proc.terminate()
                if not node.proc.wait_or_kill(STOP_TIMEOUT):
                    self.unclean_stops.append(f"{node.label} needed SIGKILL")
                node.proc = None
                deadline = time.monotonic() + START_TIMEOUT
                while time.monotonic() < deadline:  # the route must not hand out the dead address
                    table = cluster_info(self.namesrv_addr, POLL_CALL_TIMEOUT, tls=self.tls).get("brokerAddrTable", {})
                    if table.get(broker_name, {}).get("brokerAddrs", {}).get(str(broker_id)) != node.addr:
                        return
                    time.sleep(0.2)
                raise RuntimeError(f"{node.label} still registered after its stop")
        raise ValueError(f"no running broker {broker_name} id {broker_id}")

    def pause_broker(self, broker_name: str, broker_id: int = 0) -> None:
        """Freeze one broker (SIGSTOP): it stays in the namesrv's route but answers nothing, as a
        hung or partitioned broker does, until :meth:`resume_broker` (or :meth:`stop`)."""
        self._node(broker_name, broker_id).proc.signal(signal.SIGSTOP)  # type: ignore[union-attr]

    def resume_broker(self, broker_name: str, broker_id: int = 0) -> None:
        self._node(broker_name, broker_id).proc.signal(signal.SIGCONT)  # type: ignore[union-attr]

    def _node(self, broker_name: str, broker_id: int) -> _Node:
        for node in self._nodes:
            if (node.name, node.broker_id) == (broker_name, broker_id) and node.proc is not None:
                return node
        raise ValueError(f"no running broker {broker_name} id {broker_id}")

    def stop(self, check: bool = True, grace: float = STOP_TIMEOUT) -> None:
        """SIGTERM brokers (they persist offsets and unregister), then the namesrv.

        With ``check`` raise if a JVM needed SIGKILL or a store kept its abort file,
        because then the store on disk is not what a clean shutdown leaves. ``grace=0``
        kills at once (a 5.x broker's clean shutdown takes 10-20 s): for stores nobody reads.
        """
        t0 = time.monotonic()
        problems: list[str] = []
        running = [n for n in self._nodes if n.proc is not None]
        for node in running:
            assert node.proc is not None
            node.proc.signal(signal.SIGCONT)  # a paused broker must be able to shut down
            node.proc.terminate()
        for node in running:
            assert node.proc is not None
            if not node.proc.wait_or_kill(grace):
                problems.append(f"{node.label} needed SIGKILL")
            elif (node.store / "abort").exists():
                problems.append(f"{node.label} left {node.store / 'abort'} (unclean store shutdown)")
            node.proc = None
        if self._namesrv is not None:
            self._namesrv.terminate()
            if not self._namesrv.wait_or_kill(grace):
                problems.append("namesrv needed SIGKILL")
        self._namesrv = None
        _LIVE.discard(self)
        self.unclean_stops += problems
        self.timings["stop"] = time.monotonic() - t0
        if check and problems:
            raise RuntimeError("unclean RocketMQ stop: " + "; ".join(problems))

    # -- internals ---------------------------------------------------------------------

    def _start_namesrv(self, attempts: int = 5) -> None:
        for attempt in range(attempts):
            port = pick_port_block(taken=self._taken)
            conf = self.workdir / "namesrv.properties"
            lines = [
                f"listenPort={port}",
                f"kvConfigPath={self.workdir / 'namesrv' / 'kvConfig.json'}",
                f"rocketmqHome={self.workdir / 'rmq-home'}",
            ]
            if not is_v4(self.version):
                lines.append("bindAddress=127.0.0.1")
            conf.write_text("\n".join(lines) + "\n")
            cmd = _jvm_command(
                self.version,
                "namesrv",
                self.workdir,
                ("-Xms64m", "-Xmx256m"),
                NAMESRV_MAIN,
                ["-c", str(conf)],
                log_name="namesrv.log",
                props=self.jvm_props,
            )
            proc = _JavaProcess("namesrv", cmd, self.workdir, self.workdir / "logs" / "namesrv.log")
            self._namesrv = proc
            try:
                proc.wait_for_line("The Name Server boot success", proc.started + START_TIMEOUT)
                self.namesrv_addr = f"127.0.0.1:{port}"
                self._wait_tcp(proc, port, proc.started + START_TIMEOUT)
                return
            except ProcessStartError as err:
                proc.terminate()
                proc.wait_or_kill(5)
                self._namesrv = None
                if not err.bind_conflict or attempt == attempts - 1:
                    raise

    def _broker_conf(self, node: _Node, port: int) -> Path:
        store = node.store
        store.mkdir(parents=True, exist_ok=True)
        has_slaves = any(n.broker_id != 0 for n in self._nodes)
        conf: dict[str, object] = {
            "rocketmqHome": self.workdir / "rmq-home",
            "brokerClusterName": self.cluster_name,
            "brokerName": node.name,
            "brokerId": node.broker_id,
            "namesrvAddr": self.namesrv_addr,
            "listenPort": port,
            "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1",
            "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog",
            "mappedFileSizeCommitLog": 16 * 1024 * 1024,
            "mappedFileSizeConsumeQueue": 600_000,
            "maxHashSlotNum": 10_000,
            "maxIndexNum": 40_000,
            "autoCreateTopicEnable": True,
            "autoCreateSubscriptionGroup": True,
            "diskMaxUsedSpaceRatio": 95,
            "waitTimeMillsInSendQueue": 1000,
        }
        if has_slaves:
            conf["brokerRole"] = "ASYNC_MASTER" if node.broker_id == 0 else "SLAVE"
            conf["haListenPort"] = port + 1
            if node.broker_id != 0 and is_v4(self.version):
                # A 5.x slave given haMasterAddress never connects (its HA client keeps a null
                # master, and the address from the name server is then ignored); left unset, it
                # takes the master's HA address from its registration result, as 4.x can too.
                master = next(n for n in self._nodes if n.index == node.index and n.broker_id == 0)
                conf["haMasterAddress"] = f"127.0.0.1:{master.port + 1}"
        if self.plain_acl is not None:
            conf["aclEnable"] = True
        if not is_v4(self.version):
            conf |= {"bindAddress": "127.0.0.1", "haListenPort": port + 1, "mappedFileSizeTimerLog": 16 * 1024 * 1024}
            if self.server_side_reset is not None:
                conf["useServerSideResetOffset"] = self.server_side_reset
            if self.auth:
                assert self.credentials is not None
                conf |= auth_broker_conf(self.credentials)
        conf |= self.extra_broker_conf
        conf |= self.broker_conf.get(node.name, {})
        path = store.parent / ("broker.properties" if node.broker_id == 0 else "slave.properties")
        path.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in conf.items()))
        return path

    def _launch_broker(self, node: _Node) -> None:
        node.port = pick_port_block(below=2, above=1, taken=self._taken)
        conf = self._broker_conf(node, node.port)
        cmd = _jvm_command(
            self.version,
            "broker",
            self.workdir,
            ("-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m"),
            BROKER_MAIN,
            ["-c", str(conf), "-n", self.namesrv_addr],
            log_name=f"{node.label}.log",
            props=self.jvm_props,
        )
        node.proc = _JavaProcess(node.label, cmd, self.workdir, self.workdir / "logs" / f"{node.label}.log")

    def _start_brokers(self, attempts: int = 5) -> None:
        """Launch all masters at once (they boot in parallel) and wait for each; then the slaves."""
        for wave in ([n for n in self._nodes if n.broker_id == 0], [n for n in self._nodes if n.broker_id != 0]):
            for node in wave:
                self._launch_broker(node)
            for node in wave:
                for attempt in range(attempts):
                    assert node.proc is not None
                    try:
                        self._await_broker(node)
                        break
                    except ProcessStartError as err:
                        node.proc.terminate()
                        node.proc.wait_or_kill(10)
                        if not err.bind_conflict or attempt == attempts - 1:
                            raise
                        self._launch_broker(node)
        self.brokers = [(n.name, n.addr) for n in self._nodes if n.broker_id == 0]

    def _await_broker(self, node: _Node) -> None:
        proc = node.proc
        assert proc is not None
        deadline = proc.started + START_TIMEOUT
        line = proc.wait_for_line("boot success", deadline)
        if node.addr not in line:
            raise proc.failure(f"booted on an unexpected address: {line!r} (wanted {node.addr})")
        self._wait_tcp(proc, node.port, deadline)

        def registered() -> bool:
            table = cluster_info(self.namesrv_addr, POLL_CALL_TIMEOUT, tls=self.tls).get("brokerAddrTable", {})
            return bool(table.get(node.name, {}).get("brokerAddrs", {}).get(str(node.broker_id)) == node.addr)

        def runtime_info_ok() -> bool:
            head, _ = remoting_call(
                node.addr,
                GET_BROKER_RUNTIME_INFO,
                timeout=POLL_CALL_TIMEOUT,
                credentials=self.credentials,
                tls=self.tls,
            )
            return head.get("code") == 0

        if _version_tuple(self.version) >= (5, 4):
            # 5.5.1 logs boot success ~10 s before its first registration here: wait for the broker
            # to say it registered, then (below) for the namesrv to route it.
            _poll(proc, deadline, "its first registration", lambda: REGISTERED_LINE in proc.log_text())
        _poll(proc, deadline, "registration in the namesrv", registered)
        # A fresh 4.9.8 broker answers GET_BROKER_RUNTIME_INFO with SYSTEM_ERROR
        # (NoSuchElementException from an empty TPS sample list) for its first seconds,
        # so clusterList would print an empty version column; wait that out too.
        _poll(proc, deadline, "GET_BROKER_RUNTIME_INFO success", runtime_info_ok)

    @staticmethod
    def _wait_tcp(proc: _JavaProcess, port: int, deadline: float) -> None:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if proc.proc.poll() is not None:
                    raise proc.failure(f"exited with {proc.proc.returncode}") from None
                if time.monotonic() > deadline:
                    raise proc.failure(f"port {port} not accepting connections") from None
                time.sleep(0.1)


class RealProxy:
    """A 5.x ``rocketmq-proxy`` in cluster mode in front of a running :class:`RealCluster`.

    Cluster mode is the separate deployment (the proxy is a client of namesrv and brokers);
    local mode would embed a broker in the proxy's JVM instead.  The gRPC port is what the
    apache/rocketmq-clients SDKs connect to; the remoting port speaks the classic protocol.
    Both listen on every interface (the proxy has no bind-address setting); everything is
    advertised and dialled on 127.0.0.1.  Config, logs and user.home live under ``workdir``.
    """

    def __init__(self, cluster: RealCluster, workdir: str | Path | None = None) -> None:
        if is_v4(cluster.version):
            raise ValueError("rocketmq-proxy exists from 5.0 on")
        if cluster.credentials is not None or cluster.tls is not None or cluster.jvm_props:
            raise ValueError("the proxy harness fronts plain clusters only (no auth, no TLS)")
        self.cluster = cluster
        # A split release's proxy is the filling release's own distribution (a 5.5.1 cluster runs
        # the 5.5.0 proxy with its 5.5.0 jars, as its binary package ships them).
        self.version = module_version(cluster.version, "rocketmq-proxy")
        self.workdir = Path(workdir or cluster.workdir / "proxy").resolve()
        self.grpc_port = 0
        self.remoting_port = 0
        self.timings: dict[str, float] = {}
        self.unclean_stops: list[str] = []
        self._proc: _JavaProcess | None = None

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def remoting_addr(self) -> str:
        return f"127.0.0.1:{self.remoting_port}"

    def __enter__(self) -> RealProxy:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(check=exc_type is None)

    def _config(self) -> Path:
        conf = {
            "rocketMQClusterName": self.cluster.cluster_name,
            "proxyClusterName": "TestProxyCluster",
            "proxyName": "test-proxy",
            "proxyMode": "cluster",
            "namesrvAddr": self.cluster.namesrv_addr,
            "grpcServerPort": self.grpc_port,
            "remotingListenPort": self.remoting_port,
            # Default is the first non-loopback address, which clients would then be sent to.
            "localServeAddr": "127.0.0.1",
            "remotingAccessAddr": "127.0.0.1",
            "enablePrintJstack": False,
            "grpcShutdownTimeSeconds": 3,  # default 30: every stop would wait that out
        }
        path = self.workdir / "rmq-proxy.json"
        path.write_text(json.dumps(conf, indent=2) + "\n")
        return path

    def start(self, attempts: int = 5) -> None:
        """Resolve the proxy's jars, start it and wait until its gRPC port accepts connections."""
        if self._proc is not None:
            raise RuntimeError("proxy already started")
        if not self.cluster.namesrv_addr:
            raise RuntimeError("start the cluster first")
        t0 = time.monotonic()
        ensure_dist(self.version, PROXY_COMPONENT)
        self.timings["dist"] = time.monotonic() - t0
        self.workdir.mkdir(parents=True, exist_ok=True)
        home = _prepare_home(self.workdir)
        _LIVE.add(self)
        taken: set[int] = set(self.cluster._taken)
        t1 = time.monotonic()
        for attempt in range(attempts):
            self.grpc_port = pick_port_block(above=1, taken=taken)
            self.remoting_port = self.grpc_port + 1
            cmd = _jvm_command(
                self.version,
                "proxy",
                self.workdir,
                ("-Xms128m", "-Xmx384m", "-XX:MaxDirectMemorySize=128m"),
                PROXY_MAIN,
                ["-pc", str(self._config())],
                log_name="proxy.log",
                props={"RMQ_PROXY_HOME": str(home)},
                component=PROXY_COMPONENT,
            )
            proc = _JavaProcess("proxy", cmd, self.workdir, self.workdir / "logs" / "proxy.log")
            self._proc = proc
            try:
                deadline = proc.started + PROXY_START_TIMEOUT
                proc.wait_for_line("rocketmq-proxy startup successfully", deadline)
                RealCluster._wait_tcp(proc, self.grpc_port, deadline)
                RealCluster._wait_tcp(proc, self.remoting_port, deadline)
                break
            except ProcessStartError as err:
                proc.terminate()
                proc.wait_or_kill(10)
                self._proc = None
                if not err.bind_conflict or attempt == attempts - 1:
                    _LIVE.discard(self)
                    raise
        self.timings["proxy"] = time.monotonic() - t1

    def terminate(self) -> None:
        """Send SIGTERM without waiting, so the proxy (10-15 s) and the cluster (20 s) can shut
        down side by side; :meth:`stop` then waits for it."""
        if self._proc is not None:
            self._proc.terminate()

    def stop(self, check: bool = True) -> None:
        """SIGTERM (its hook closes gRPC and its broker clients); raise on SIGKILL with ``check``."""
        t0 = time.monotonic()
        if self._proc is not None:
            self._proc.terminate()
            if not self._proc.wait_or_kill(STOP_TIMEOUT):
                self.unclean_stops.append("proxy needed SIGKILL")
            self._proc = None
        _LIVE.discard(self)
        self.timings["stop"] = time.monotonic() - t0
        if check and self.unclean_stops:
            raise RuntimeError("unclean proxy stop: " + "; ".join(self.unclean_stops))


# --------------------------------------------------------------------------------------
# Script entry point
# --------------------------------------------------------------------------------------


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    fetch = sub.add_parser("fetch", help="resolve and cache the jars")
    fetch.add_argument("version", help=f"e.g. {', '.join(VERSIONS)}")
    start = sub.add_parser("start", help="run a cluster until Ctrl-C")
    start.add_argument("version", help=f"e.g. {', '.join(VERSIONS)}")
    start.add_argument("--brokers", type=int, default=1)
    start.add_argument("--proxy", action="store_true", help="also a rocketmq-proxy (5.x) for gRPC clients")
    start.add_argument(
        "--workdir", type=Path, default=None, help="kept after exit; default is a temporary dir that is removed"
    )
    args = parser.parse_args(argv)

    if args.cmd == "fetch":
        t0 = time.monotonic()
        print(ensure_dist(args.version), f"({time.monotonic() - t0:.1f}s)")
        return 0

    stop_event = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop_event.set())
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"rmq-{args.version}-")))
        cluster = stack.enter_context(RealCluster(args.version, workdir, brokers=args.brokers))
        print(cluster.namesrv_addr, flush=True)
        for name, addr in cluster.brokers:
            print(f"# {name} {addr}", file=sys.stderr)
        if args.proxy:
            proxy = stack.enter_context(RealProxy(cluster))
            print(f"# proxy gRPC {proxy.grpc_endpoint}, remoting {proxy.remoting_addr}", file=sys.stderr)
        print(f"# workdir {workdir}; timings {cluster.timings}; Ctrl-C to stop", file=sys.stderr, flush=True)
        while not stop_event.wait(1.0):
            pass
        print("# stopping", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main())

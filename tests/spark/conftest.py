"""Fixtures of the Spark credential tests: certificates and an ACL + TLS mock server."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.spark.secret_support import Served, Tls, make_tls, serve


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl tool is needed to make test certificates")
    return make_tls(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tls: Tls) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("acl") / "store", tls) as server:
        yield server

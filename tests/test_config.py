from __future__ import annotations

from pathlib import Path

import pytest

from mqadmin.config import connection_settings
from mqadmin.errors import UsageError


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.ini").write_text(text)


def test_options_beat_environment_beat_profile(mqadmin_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(
        mqadmin_home,
        "[default]\nnamesrv = p:9876\naccess_key = pak\nsecret_key = psk\n[prod]\nnamesrv = prod:9876\ntls = true\n",
    )
    assert connection_settings({}) == ("p:9876", {"access_key": "pak", "secret_key": "psk"})
    monkeypatch.setenv("MQADMIN_ACCESS_KEY", "eak")
    monkeypatch.setenv("MQADMIN_SECRET_KEY", "esk")
    monkeypatch.setenv("NAMESRV_ADDR", "e:9876")
    assert connection_settings({}) == ("e:9876", {"access_key": "eak", "secret_key": "esk"})
    assert connection_settings({"namesrv": "o:1", "access_key": "oak", "secret_key": "osk"})[1]["secret_key"] == "osk"
    monkeypatch.delenv("NAMESRV_ADDR")
    address, options = connection_settings({"profile": "prod"})
    assert address == "prod:9876" and options["tls"] is True


def test_bad_profiles_and_half_credentials(mqadmin_home: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        connection_settings({"profile": "prod"})
    write_config(mqadmin_home, "[default]\nnamesrv = x\nsecret = oops\n")
    with pytest.raises(UsageError, match="unknown key"):
        connection_settings({})
    write_config(mqadmin_home, "[default]\nnamesrv = x\n")
    with pytest.raises(UsageError, match="no profile"):
        connection_settings({"profile": "nope"})
    with pytest.raises(UsageError, match="both an access key and a secret key"):
        connection_settings({"access_key": "only"})


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[default\nnamesrv = x\n", "line 1: '[default' comes before any [section] header"),
        ("[default]\nnamesrv\n", "line 2: 'namesrv' is neither [section] nor key = value"),
        ("[a]\n[a]\n", "line 2: section [a] appears twice"),
        ("[a]\nx = 1\nx = 2\n", "line 3: key 'x' appears twice in [a]"),
    ],
)
def test_a_broken_config_is_one_line_naming_file_and_line(mqadmin_home: Path, text: str, problem: str) -> None:
    write_config(mqadmin_home, text)
    with pytest.raises(UsageError) as caught:
        connection_settings({})
    message = str(caught.value)
    assert message == f"{mqadmin_home / 'config.ini'} is not a valid config file: {problem}"
    assert "\n" not in message and "PosixPath" not in message
    (mqadmin_home / "config.ini").write_bytes(b"\xff\xfe[default]\n")
    with pytest.raises(UsageError, match="config.ini is not a valid config file: it is not UTF-8 text$"):
        connection_settings({})


def test_a_tls_file_that_cannot_be_read_is_named_with_where_it_came_from(mqadmin_home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    with pytest.raises(UsageError, match=f"^--tls-ca {missing}: No such file or directory$"):
        connection_settings({"tls_ca": str(missing)})
    with pytest.raises(UsageError, match=f"^--tls-cert {tmp_path}: a directory, not a PEM file$"):
        connection_settings({"tls_cert": str(tmp_path)})
    write_config(mqadmin_home, f"[default]\ntls_key = {missing}\n")
    with pytest.raises(UsageError, match=f"^tls_key = {missing} in {mqadmin_home / 'config.ini'}: No such file"):
        connection_settings({})

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

"""Broadcast consumers' local offset files: find them, read them as the clients do, write safely.

A BROADCASTING consumer keeps its offsets on its own host, in
``<localOffsetStoreDir>/<clientId>/<group>/offsets.json`` (client: LocalFileOffsetStore.java; the
folder defaults to ``~/.rocketmq_offsets``; docs/protocol.md, "Client offsets files"), so no broker
knows them. The Java client writes fastjson with message-queue *objects* as keys; the C++ client
(current master) writes JSON whose keys are *strings* holding the queue's JSON; ali-ons writes
``[topic="T", brokerName="b", queueId="0"]`` strings. We read all three, fall back to
``offsets.json.bak`` exactly when the clients do, and write back in the form the file has, with
the clients' own protocol (``.tmp`` → ``.bak`` → rename) so a client starting at any moment reads
the old or the new offsets, never a torn file.

The C++ client 2.x (the one rocketmq-client-python loads) is different in every respect: its file
is ``~/.rocketmq_offsets/<ip>@<instanceName>/<group>/offsets.Json`` (capital J), a Boost text
archive of ``std::map<std::string, int64>`` keyed by each queue's styled JSON text; it writes the
whole archive to ``offsets.Json.bak`` and renames that over ``offsets.Json``, and it never reads
the ``.bak``: a missing file means no offsets, an empty or unreadable one stops the consumer's
start. We read, and write, exactly that.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqadmin import fastjson
from mqadmin.boost_archive import (
    ArchiveError,
    ArchiveHeader,
    boost_key,
    is_boost_archive,
    parse_boost_offsets,
    render_boost_archive,
)
from mqadmin.errors import StoreError, UsageError
from mqadmin.model import MessageQueue
from mqadmin.safety import fsync_dir

OFFSETS_FILE = "offsets.json"
#: rocketmq-client-cpp 2.x (rocketmq-client-python): a Boost text archive, despite the name
BOOST_FILE = "offsets.Json"
BAK = ".bak"
TMP = ".tmp"
#: key forms, by the client that writes them
JAVA, CPP, ONS, BOOST = "java", "cpp", "ons", "boost"
#: where the offsets came from (FROM_FILE: the offsets file itself, whichever its name)
FROM_FILE, FROM_BAK, FROM_NONE = OFFSETS_FILE, OFFSETS_FILE + BAK, "none"
LAYOUT_HINT = (
    "broadcast consumers keep them in ~/.rocketmq_offsets/<clientId>/<group>/offsets.json, "
    "or offsets.Json for rocketmq-client-cpp 2.x"
)
#: the file names a group folder may hold offsets in, one client form family each
MAIN_FILES = (OFFSETS_FILE, BOOST_FILE)


class FileChanged(UsageError):
    """The file is not what the plan was made from (a client wrote it meanwhile)."""


@dataclass
class OffsetsFile:
    """One client's offsets of one group, as that client would load them."""

    path: Path  # the offsets.json or offsets.Json (it may be missing when only the .bak is left)
    group: str
    client: str
    offsets: dict[MessageQueue, int] = field(default_factory=dict)
    source: str = FROM_FILE
    style: str = JAVA
    #: why the .bak was read, or why there are no offsets; None when the file itself was fine
    note: str | None = None
    #: the client fails to start on these files (offsets.json and its .bak both unreadable; an
    #: empty or unreadable offsets.Json), or mqadmin refuses to interpret them
    broken: bool = False
    main_bytes: bytes | None = None
    bak_bytes: bytes | None = None
    #: the key text of each queue in a string-keyed file, so a rewrite keeps the keys as they were
    key_text: dict[MessageQueue, str] = field(default_factory=dict)
    #: a Boost archive's header fields, repeated as they were when the file is rewritten
    archive: ArchiveHeader | None = None

    @property
    def bak_path(self) -> Path:
        return self.path.with_name(self.path.name + BAK)

    @property
    def previous_copy(self) -> Path | None:
        """Where a rewrite leaves the previous content: the .bak of the JSON forms; nowhere for
        the Boost form, whose client uses the .bak only as the new file's staging name."""
        return None if self.style == BOOST else self.bak_path

    @property
    def read_from(self) -> str:
        """The file name the offsets came from (offsets.json, offsets.Json, a .bak) or "none"."""
        if self.source == FROM_FILE:
            return self.path.name
        if self.source == FROM_BAK:
            return self.bak_path.name
        return self.source

    def to_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "group": self.group,
            "path": str(self.path),
            "source": self.source,
            "form": self.style,
            "note": self.note,
        }


# ---------------------------------------------------------------------------------------------
# Reading


def parse_offsets(data: bytes) -> tuple[dict[MessageQueue, int], str, dict[MessageQueue, str]]:
    """(offsets, key form, key text) of a file's content; ValueError where a client's parser fails."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    doc = fastjson.loads(text)
    if doc is None:  # "null": both clients load no offsets and do not try the .bak
        return {}, _style_of_text(text), {}
    if not isinstance(doc, dict):
        raise ValueError(f"the document is a JSON {type(doc).__name__}, not an object")
    table = doc.get("offsetTable")
    if table is None:
        return {}, _style_of_text(text), {}
    if not isinstance(table, dict):
        raise ValueError("offsetTable is not an object")
    offsets: dict[MessageQueue, int] = {}
    key_text: dict[MessageQueue, str] = {}
    style: str | None = None
    for key, value in table.items():
        mq = fastjson.to_message_queue(key)
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"offset of {mq} is {value!r}, not a number")
        offsets[mq] = int(value)
        if isinstance(key, str):
            key_text[mq] = key
            style = style or (ONS if key.lstrip().startswith("[") else CPP)
        else:
            style = style or JAVA
    return offsets, style or _style_of_text(text), key_text


def _style_of_text(text: str) -> str:
    return CPP if '" : ' in text else JAVA


def _read_bytes(path: Path) -> bytes | None:
    """The file's bytes; None when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise UsageError(f"{path} is a folder, not an offsets file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None


def read_offsets_file(path: Path, group: str, client: str) -> OffsetsFile:
    """Load as the Java and C++ clients do: offsets.json, or offsets.json.bak when the file is
    missing, empty or does not parse; a .bak that does not parse either stops the client.
    An offsets.Json (or any file holding a Boost archive) is loaded as C++ client 2.x does."""
    out = OffsetsFile(path=path, group=group, client=client)
    out.main_bytes = _read_bytes(path)
    out.bak_bytes = _read_bytes(out.bak_path)
    if path.name == BOOST_FILE or is_boost_archive(out.main_bytes or b""):
        return _read_boost(out)
    if out.main_bytes:
        try:
            out.offsets, out.style, out.key_text = parse_offsets(out.main_bytes)
            return out
        except ValueError as exc:
            reason = f"{OFFSETS_FILE} is corrupt ({_short(exc)})"
    else:
        reason = f"{OFFSETS_FILE} is {'missing' if out.main_bytes is None else 'empty'}"
    if not out.bak_bytes:
        out.source = FROM_NONE
        out.note = f"{reason} and there is no usable {FROM_BAK}: the client starts from its consumeFromWhere"
        if out.main_bytes:
            out.style = _style_of_text(out.main_bytes.decode("utf-8", "replace"))
        return out
    try:
        out.offsets, out.style, out.key_text = parse_offsets(out.bak_bytes)
    except ValueError as exc:
        out.source = FROM_NONE
        out.broken = True
        out.note = (
            f"{reason}, and {FROM_BAK} is corrupt too ({_short(exc)}): "
            "the client fails to start on these files (readLocalOffset Exception)"
        )
        return out
    out.source = FROM_BAK
    out.note = f"{reason}; read {FROM_BAK}, as the client does"
    return out


def _read_boost(out: OffsetsFile) -> OffsetsFile:
    """C++ client 2.x's load(): no file, no offsets; an empty or unreadable file fails the
    consumer's start; the .bak (its staging file) is never read."""
    name = out.path.name
    out.style = BOOST
    if out.main_bytes is None:
        out.source = FROM_NONE
        out.note = f"{name} is missing: the client starts from its consumeFromWhere"
        if out.bak_bytes is not None:
            out.note += f" ({name}{BAK} is an unfinished write, which rocketmq-client-cpp 2.x never reads)"
        return out
    if not out.main_bytes:
        out.source, out.broken = FROM_NONE, True
        out.note = f"{name} is empty: rocketmq-client-cpp 2.x fails to start on it (delete it to start afresh)"
        return out
    try:
        out.offsets, out.key_text, out.archive = parse_boost_offsets(out.main_bytes)
    except ArchiveError as exc:
        out.source, out.broken = FROM_NONE, True
        out.note = (
            f"{name} is not a Boost archive the client can load ({_short(exc)}): "
            "rocketmq-client-cpp 2.x fails to start on it"
        )
    except ValueError as exc:
        out.source, out.broken = FROM_NONE, True
        out.note = f"{name} is not as rocketmq-client-cpp 2.x writes it ({_short(exc)}): mqadmin does not read it"
    return out


def _short(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def find_offset_files(path: Path, group: str | None = None) -> list[OffsetsFile]:
    """Every client's offsets file of ``group`` (all groups when None) at or under ``path``.

    ``path`` may be one offsets.json (or offsets.Json), a client's folder (``<clientId>/`` or its
    ``<group>/``), a whole offsets folder, or a tree collected from many hosts: each
    ``<group>/offsets.json`` or ``<group>/offsets.Json`` found is one client's, named by its
    ``<clientId>`` folder (by its path when that repeats; with the file's name when one folder
    holds both, as after an upgrade from the 2.x C++ client).
    """
    path = path.expanduser()
    if not path.exists():
        raise UsageError(f"--local-store {path}: no such file or folder")
    if path.is_file():
        main = path.with_name(_main_name(path.name) or path.name)
        entries = [(main.parent, main.name)]
        root = main.parent.parent
    else:
        entries = [(f, name) for f in _group_folders(path) for name in _offsets_names(f)]
        root = path
        if not entries:
            raise UsageError(f"no {OFFSETS_FILE} under {path}, nor {BOOST_FILE} ({LAYOUT_HINT})")
    folders = sorted({f for f, _ in entries})
    groups = sorted({f.name for f in folders})
    if group is not None:
        picked = [f for f in folders if f.name == group]
        if not picked:
            if path.is_file() or len(folders) == 1:
                raise UsageError(
                    f"{path} holds the offsets of group {folders[0].name!r} (its folder's name), not of -g {group}"
                )
            raise UsageError(f"no offsets of group {group!r} under {path} (groups there: {', '.join(groups)})")
        entries = [(f, name) for f, name in entries if f.name == group]
        folders = picked
    labels = _client_labels(folders, root)
    shared = {f for f in folders if sum(1 for g, _ in entries if g == f) > 1}
    files = [
        read_offsets_file(f / name, f.name, f"{labels[f]} ({name})" if f in shared else labels[f])
        for f, name in sorted(entries)
    ]
    return sorted(files, key=lambda f: (f.group, f.client))


def _main_name(name: str) -> str | None:
    """The offsets file a name belongs to: itself, or the file its .bak or .tmp stands for."""
    for main in MAIN_FILES:
        if name in (main, main + BAK, main + TMP):
            return main
    return None


def _group_folders(top: Path) -> Iterable[Path]:
    if _offsets_names(top):
        yield top
        return
    for folder, dirs, _files in os.walk(top, followlinks=False):
        dirs.sort()
        here = Path(folder)
        if here != top and _offsets_names(here):
            yield here


def _offsets_names(folder: Path) -> list[str]:
    """The offsets files a group folder holds (or only their .bak), by their names as listed,
    so offsets.json and offsets.Json stay apart on a case-insensitive file system too."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return []
    return [main for main in MAIN_FILES if any(n in names and (folder / n).is_file() for n in (main, main + BAK))]


def _client_labels(folders: list[Path], root: Path) -> dict[Path, str]:
    """Each group folder's client: its parent's name, or its parent's path when names repeat."""
    by_name: dict[str, int] = {}
    for f in folders:
        key = f"{f.parent.name}/{f.name}"
        by_name[key] = by_name.get(key, 0) + 1
    out = {}
    for f in folders:
        label = f.parent.name
        if by_name[f"{label}/{f.name}"] > 1:
            try:
                label = f.parent.relative_to(root).as_posix()
            except ValueError:
                label = str(f.parent)
        out[f] = label or str(f.parent)
    return out


# ---------------------------------------------------------------------------------------------
# Writing


def render(file: OffsetsFile, offsets: Mapping[MessageQueue, int]) -> bytes:
    """The file's new content, in the form the file already has."""
    if file.style == BOOST:
        entries = {file.key_text.get(mq) or boost_key(mq): int(off) for mq, off in offsets.items()}
        return render_boost_archive(entries, file.archive or ArchiveHeader())
    if file.style == CPP:
        return _render_cpp(file, offsets).encode()
    if file.style == ONS:
        table = {file.key_text.get(mq) or _ons_key(mq): int(off) for mq, off in offsets.items()}
        return json.dumps({"offsetTable": table}, separators=(",", ":")).encode()
    return fastjson.dumps_pretty({"offsetTable": {mq: int(off) for mq, off in offsets.items()}}).encode()


def _render_cpp(file: OffsetsFile, offsets: Mapping[MessageQueue, int]) -> str:
    """jsoncpp's styled writer, as the C++ client persists: tab indents, ``" : "``, keys in byte order."""
    keys = {file.key_text.get(mq) or _cpp_key(mq): int(off) for mq, off in offsets.items()}
    if not keys:
        return '{\n\t"offsetTable" : {}\n}'
    lines = [f"\t\t{json.dumps(k)} : {v}" for k, v in sorted(keys.items(), key=lambda kv: kv[0].encode())]
    return '{\n\t"offsetTable" : \n\t{\n' + ",\n".join(lines) + "\n\t}\n}"


def _cpp_key(mq: MessageQueue) -> str:
    return json.dumps({"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}, separators=(",", ":"))


def _ons_key(mq: MessageQueue) -> str:
    return f'[topic="{mq.topic}", brokerName="{mq.broker_name}", queueId="{mq.queue_id}"]'


def check_writable(files: Iterable[OffsetsFile]) -> None:
    """Refuse before anything is written when a folder cannot take the new file."""
    for f in files:
        folder = f.path.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UsageError(f"cannot write in {folder}: permission denied (nothing was changed)")
        for existing in (f.path, f.bak_path):
            if existing.exists() and not os.access(existing, os.R_OK):
                raise UsageError(f"cannot read {existing}: permission denied (nothing was changed)")


def write_offsets(file: OffsetsFile, offsets: Mapping[MessageQueue, int]) -> None:
    """Write the client's way, so a client starting meanwhile never sees a torn file.

    JSON forms: new content to ``.tmp``, the previous content to ``.bak``, rename; a client
    starting meanwhile reads the old file (or the .bak holding the old content). A corrupt
    offsets.json is not copied over a good .bak. Boost form (C++ client 2.x): new content to
    ``offsets.Json.bak``, rename over offsets.Json; that client never reads the .bak, and a
    rename is atomic. Refuses (FileChanged) when either file differs from what the plan was made
    from.
    """
    data = render(file, offsets)
    ensure_unchanged(file)
    boost = file.style == BOOST
    staging = file.bak_path if boost else file.path.with_name(file.path.name + TMP)
    like = file.path if file.main_bytes is not None else (file.bak_path if file.bak_bytes is not None else None)
    try:
        _write_synced(staging, data, like)
        if not boost and file.source == FROM_FILE and file.main_bytes:
            _write_synced(file.bak_path, file.main_bytes, file.path)
        ensure_unchanged(file, ignore_bak=boost or file.source == FROM_FILE)
        os.replace(staging, file.path)
        fsync_dir(file.path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            staging.unlink()
        raise StoreError(f"cannot write {file.path}: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            staging.unlink()
        raise


def ensure_unchanged(file: OffsetsFile, *, ignore_bak: bool = False) -> None:
    """FileChanged unless offsets.json (and its .bak) still hold what the plan was made from."""
    if _read_bytes(file.path) != file.main_bytes or (not ignore_bak and _read_bytes(file.bak_path) != file.bak_bytes):
        raise FileChanged(
            f"{file.path} changed since the plan was made (is the client running?); it was not written: "
            "run the command again"
        )


def _write_synced(path: Path, data: bytes, like: Path | None) -> None:
    """Write and fsync, keeping the mode and owner of ``like`` so the client can still write it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if like is not None:
        with contextlib.suppress(OSError):
            st = like.stat()
            os.chmod(path, st.st_mode & 0o7777)
            if os.geteuid() == 0:
                os.chown(path, st.st_uid, st.st_gid)


# ---------------------------------------------------------------------------------------------
# Backups of local offsets


def backup_rows(path: Path) -> list[dict[str, Any]]:
    """A backup's offset rows with every key, including a local backup's client and file."""
    try:
        doc = json.loads(path.read_text())
        rows = doc["offsets"]
        if not isinstance(rows, list):
            raise TypeError("offsets")
        return [dict(r) for r in rows]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"backup file {path} is not readable: {exc}") from None

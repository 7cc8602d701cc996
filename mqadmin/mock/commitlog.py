"""The commit log: numbered files of encoded message records, and the one write fault point.

``commitlog/<20-digit start offset>`` files; a record never spans two files (a BLANK record
fills a file's tail), as the broker writes them (store: CommitLog.java). Every store write, the
consume queues' too, appends through ``append_file``.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mqadmin.errors import StoreError
from mqadmin.message import MAGIC_BLANK, MAGIC_V1, MAGIC_V2, read_store_timestamp

BLANK_HEAD = struct.Struct(">ii")
DEFAULT_COMMITLOG_FILE_SIZE = 1 << 30  # RocketMQ's default mappedFileSizeCommitLog
_HEAD_PEEK = 80  # enough of a record to read its store timestamp (IPv6 born host included)


class StoreWriteFailed(StoreError):
    """A write to the store failed (disk full, I/O error); the store was rolled back to its
    last whole record, so later writes can succeed once the cause is gone."""


#: every store write goes through here: a fault point tests replace to simulate a full disk
_os_write: Callable[[int, memoryview], int] = os.write


def append_file(path: Path, expected_size: int, data: bytes, what: str) -> None:
    """Append ``data`` to ``path``, which must be ``expected_size`` bytes long; all or nothing."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size != expected_size:
            raise StoreError(f"{what} {path} is {size} bytes, expected {expected_size}")
        view = memoryview(data)
        try:
            while view:
                view = view[_os_write(fd, view) :]
        except OSError as exc:
            # A torn record would stop every later scan of the file: cut back to the last whole one.
            try:
                os.ftruncate(fd, expected_size)
            except OSError as trunc_exc:
                raise StoreWriteFailed(
                    f"cannot write {what} {path} ({exc.strerror}), nor cut it back ({trunc_exc.strerror})"
                ) from None
            raise StoreWriteFailed(f"cannot write {what} {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def file_name(offset: int) -> str:
    return f"{offset:020d}"


def numbered_files(folder: Path) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        return []
    out = []
    for p in folder.iterdir():
        if p.is_file() and len(p.name) == 20 and p.name.isdigit():
            out.append((int(p.name), p))
    return sorted(out)


class CommitLog:
    def __init__(self, folder: Path, file_size: int):
        self.folder = folder
        self.file_size = file_size
        self._files = numbered_files(folder)
        self._fds: dict[int, int] = {}
        #: read-only maps of the files, for zero-copy reads in bulk (``view``)
        self._maps: dict[int, mmap.mmap] = {}
        self._last_map: tuple[int, mmap.mmap] | None = None
        self._lock = threading.Lock()
        self._write_pos: int | None = None

    @property
    def min_offset(self) -> int:
        return self._files[0][0] if self._files else 0

    def _refresh(self) -> None:
        self._files = numbered_files(self.folder)

    def _fd(self, start: int, path: Path) -> int:
        fd = self._fds.get(start)
        if fd is None:
            fd = os.open(path, os.O_RDONLY)
            self._fds[start] = fd
        return fd

    def read(self, offset: int, size: int) -> bytes:
        starts = [s for s, _ in self._files]
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0 or offset - starts[i] + size > self._file_len(i):
            self._refresh()
            starts = [s for s, _ in self._files]
            i = bisect.bisect_right(starts, offset) - 1
            if i < 0:
                raise StoreError(f"commit log offset {offset} is below the store's first file")
        start, path = self._files[i]
        data = os.pread(self._fd(start, path), size, offset - start)
        if len(data) < size:
            raise StoreError(f"commit log offset {offset}+{size} is beyond the end of {path.name}")
        return data

    def view(self, offset: int, size: int) -> memoryview:
        """The ``size`` bytes at ``offset`` without copying them: a slice of a read-only map of
        the file (remapped when the file has grown since). Replays read every record this way."""
        last = self._last_map  # consecutive records are nearly always in the same file
        if last is not None and 0 <= offset - last[0] and offset - last[0] + size <= len(last[1]):
            return memoryview(last[1])[offset - last[0] : offset - last[0] + size]
        return self._remap(offset, size)

    def _remap(self, offset: int, size: int) -> memoryview:
        self._refresh()
        starts = [s for s, _ in self._files]
        i = bisect.bisect_right(starts, offset) - 1
        if i < 0:
            raise StoreError(f"commit log offset {offset} is below the store's first file")
        start, path = self._files[i]
        length = self._file_len(i)
        if offset - start + size > length or size <= 0:
            raise StoreError(f"commit log offset {offset}+{size} is beyond the end of {path.name}")
        with self._lock:
            old = self._maps.get(start)
            if old is None or len(old) < offset - start + size:
                self._maps[start] = mmap.mmap(self._fd(start, path), length, access=mmap.ACCESS_READ)
                if old is not None:
                    _close_map(old)
            m = self._maps[start]
            self._last_map = (start, m)
        return memoryview(m)[offset - start : offset - start + size]

    def _file_len(self, i: int) -> int:
        try:
            return self._files[i][1].stat().st_size
        except OSError:
            return 0

    def store_timestamp(self, offset: int, size: int) -> int:
        return read_store_timestamp(self.read(offset, min(size, _HEAD_PEEK)))

    def write_position(self) -> int:
        if self._write_pos is None:
            if not self._files:
                self._write_pos = 0
            else:
                start, path = self._files[-1]
                self._write_pos = start + path.stat().st_size
        return self._write_pos

    def append(self, record_for: Any) -> tuple[int, bytes]:
        """Append the record ``record_for(offset)`` builds; rolls to a new file when it won't fit."""
        with self._lock:
            pos = self.write_position()
            record = record_for(pos)
            file_start = pos - pos % self.file_size if self.file_size else 0
            room = file_start + self.file_size - pos
            if len(record) + BLANK_HEAD.size > room:
                if pos > file_start:
                    self._write_at(pos, BLANK_HEAD.pack(room, MAGIC_BLANK) + b"\0" * (room - BLANK_HEAD.size))
                pos = file_start + self.file_size
                self._write_pos = pos  # the blank tail is whole even if the record below fails
                record = record_for(pos)
            self._write_at(pos, record)
            self._write_pos = pos + len(record)
            return pos, record

    def _write_at(self, pos: int, data: bytes) -> None:
        start = pos - pos % self.file_size
        if self._files and self._files[-1][0] == start:
            path = self._files[-1][1]
        else:
            path = self.folder / file_name(start)
            self.folder.mkdir(parents=True, exist_ok=True)
        append_file(path, pos - start, data, "commit log")
        if not self._files or self._files[-1][0] != start:
            self._files.append((start, path))

    def truncate(self, pos: int) -> None:
        """Forget everything from ``pos`` on (a record whose queue entry could not be written)."""
        with self._lock:
            start = pos - pos % self.file_size if self.file_size else 0
            path = self.folder / file_name(start)
            if path.exists():
                os.truncate(path, pos - start)
            self._write_pos = pos

    def recover(self) -> int:
        """Cut a torn tail off the last file, as the broker's recovery does; the bytes cut.

        Walks the records (size, magic) from the file's start and keeps whole ones; a crash or a
        full disk under an older writer may have left part of a record behind.
        """
        self._refresh()
        if not self._files:
            return 0
        start, path = self._files[-1]
        length = path.stat().st_size
        pos = 0
        with open(path, "rb") as f:
            while pos + BLANK_HEAD.size <= length:
                f.seek(pos)
                size, magic = BLANK_HEAD.unpack(f.read(BLANK_HEAD.size))
                if magic == MAGIC_BLANK and size > 0:
                    pos = min(pos + size, length)
                    break
                if magic not in (MAGIC_V1, MAGIC_V2) or size <= BLANK_HEAD.size or pos + size > length:
                    break
                pos += size
        if pos == length:
            return 0
        os.truncate(path, pos)
        self._write_pos = start + pos
        return length - pos

    def close(self) -> None:
        self._last_map = None
        for m in self._maps.values():
            _close_map(m)
        self._maps.clear()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _close_map(m: mmap.mmap) -> None:
    """Unmap now, or (while views of it are still held, e.g. rows not yet written) when the
    last view goes."""
    try:
        m.close()
    except BufferError:
        pass

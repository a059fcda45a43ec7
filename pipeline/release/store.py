"""The content-addressed store under a build root: every file of every release, once.

    <root>/objects/<sha256[:2]>/<sha256>     the bytes whose SHA-256 is the name, read-only

An object is written once (to a temporary name, then renamed, so the store never holds a
partial object under a real name) and never changed. Releases are hard links to objects
(`pipeline.release.tree`), so a file unchanged since the last release costs a directory
entry, not a copy; an object's link count is its reference count, and `collect` removes
the objects no release links any more. Design and the retention rule: docs/local-releases.md.

Builds and prunes take the store's lock (`locked`): a collection between an object's write
and its first link would otherwise remove it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

OBJECTS = "objects"
LOCK = ".lock"
STORED_MTIME_NS = 946_684_800 * 10**9  # 2000-01-01T00:00:00Z: every stored object's modification time


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_whole(fd: int, size: int) -> bytes:
    """The `size` bytes of an open file whose `fstat` size the caller has just read as `size`, by
    plain reads: a build reads thousands of small objects, and a buffered file object costs four
    more system calls each (and a read past the end, one more: a file that grew shows in its size)."""
    parts = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _sha256_file(path: str | os.PathLike[str], size: int | None = None) -> str | None:
    """The SHA-256 of a file's bytes; None when `size` is given and the file is of another size."""
    fd = os.open(path, os.O_RDONLY)
    try:
        actual = os.fstat(fd).st_size
        if size is not None and actual != size:
            return None
        if actual > 1 << 26:  # a large file (a bundle's zip): hashed as it is read
            with os.fdopen(os.dup(fd), "rb") as f:
                return hashlib.file_digest(f, "sha256").hexdigest()
        return hashlib.sha256(_read_whole(fd, actual)).hexdigest()
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Collected:
    objects: int = 0  # objects removed
    bytes: int = 0
    temporary: int = 0  # partial objects of killed writers removed


class Store:
    """The objects of one build root."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.dir = self.root / OBJECTS
        self._dir = os.fspath(self.dir)
        self._shards: set[str] = set()  # shard directories this object made or found

    def path(self, sha256: str) -> Path:
        return self.dir / sha256[:2] / sha256

    def _at(self, sha256: str) -> str:
        """`path` as a string: a build names each object several times, and pathlib's joins cost more
        than the link itself."""
        return f"{self._dir}/{sha256[:2]}/{sha256}"

    def has(self, sha256: str, size: int) -> bool:
        """Present with the right size (cheap: a stat). `sound` also checks the bytes."""
        try:
            return os.stat(self._at(sha256)).st_size == size
        except OSError:
            return False

    def sound(self, sha256: str, size: int) -> bool:
        """Present, of its size, and its bytes hash to its name: a read, since nothing on the file
        (its modification time, its mode) says that its bytes were not written since it was
        stored: `touch -d` and `cp -p` set the time back. Used for an object a build links without
        having its bytes at hand (a reused gzip copy)."""
        try:  # one open: the size from the descriptor, then the bytes
            return _sha256_file(self._at(sha256), size) == sha256
        except OSError:
            return False

    def holds(self, sha256: str, data: bytes) -> bool:
        """The object is exactly `data` (whose SHA-256 is `sha256`): the check of an object about to
        be linked when its bytes are at hand. Comparing the bytes proves what hashing the file
        would, at the cost of a read and a compare rather than a read and a hash."""
        try:
            fd = os.open(self._at(sha256), os.O_RDONLY)
        except OSError:
            return False
        try:
            return os.fstat(fd).st_size == len(data) and _read_whole(fd, len(data)) == data
        except OSError:
            return False
        finally:
            os.close(fd)

    def intact(self, sha256: str) -> bool:
        """The bytes hash to the name (a read)."""
        try:
            return _sha256_file(self._at(sha256)) == sha256
        except OSError:
            return False

    def put(self, data: bytes, sha256: str | None = None, *, check: bool = True) -> tuple[str, bool]:
        """Store `data`; returns (its SHA-256, whether it was written now).

        An object already present is kept when it holds exactly these bytes (`check`: `holds`,
        else its size only); any other object under the name (written in place since it was
        stored, whatever its dates say) is replaced by a fresh object, so the build that is about
        to link it heals it. The releases that linked the damaged inode keep it, and `verify`
        reports them.

        A sound object is never replaced, even one another thread stored after this call's check:
        the fresh copy is linked in only where the name is free. Renaming over it would drop the
        inode that thread may be linking at that moment, and its `link` would fail with ENOENT
        (two files of a release with the same bytes are written by two threads at once).
        """
        sha256 = sha256 or sha256_hex(data)
        target = self.path(sha256)
        if self.holds(sha256, data) if check else self.has(sha256, len(data)):
            return sha256, False
        if sha256[:2] not in self._shards:  # one mkdir per shard and store, not one per object
            target.parent.mkdir(parents=True, exist_ok=True)
            self._shards.add(sha256[:2])
        tmp = target.parent / f".tmp-{sha256[:16]}-{os.getpid()}-{threading.get_ident():x}"
        try:
            # created read-only (an object never changes: a stray write is refused, not shared);
            # the descriptor opened for writing still writes it
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o444)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                # a fixed time, so two roots hold the same files; not a mark of integrity (see `sound`)
                os.utime(fd, ns=(STORED_MTIME_NS, STORED_MTIME_NS))
            finally:
                os.close(fd)
            try:
                os.link(tmp, target)  # only where the name is free: a sound object stays the inode it is
            except FileExistsError:
                if not (self.holds(sha256, data) if check else self.has(sha256, len(data))):
                    os.replace(tmp, target)  # damaged: healed by the fresh copy
                    return sha256, True
                os.unlink(tmp)
                return sha256, False  # another writer stored the same bytes since the check
            os.unlink(tmp)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        return sha256, True

    def link(self, sha256: str, dst: str | os.PathLike[str]) -> None:
        """`dst` becomes a name of the object (a hard link: the same inode, no bytes copied).

        A damaged object being healed by another thread is renamed over between this call's
        lookup and its link, which then fails with ENOENT although the name is never absent: the
        link is tried again on the fresh object."""
        src = self._at(sha256)
        for attempt in range(3):
            try:
                os.link(src, dst)
                return
            except FileNotFoundError:
                if attempt == 2 or not os.path.exists(src):
                    raise

    def objects(self) -> Iterator[os.DirEntry[str]]:
        try:
            shards = list(os.scandir(self.dir))
        except OSError:
            return
        for shard in shards:
            if shard.is_dir(follow_symlinks=False):
                yield from os.scandir(shard.path)

    def collect(self) -> Collected:
        """Remove objects no release links (link count 1) and partial objects of dead writers.

        Call it holding the lock (`locked`): it must not run between a build's write of an
        object and that build's link to it.
        """
        out = Collected()
        for entry in self.objects():
            if entry.name.startswith(".tmp-"):
                pid = entry.name.rsplit("-", 2)[-2]
                if pid.isdigit() and int(pid) != os.getpid() and _pid_alive(int(pid)):
                    continue
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    out.temporary += 1
                continue
            st = entry.stat(follow_symlinks=False)
            if st.st_nlink <= 1:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    out.objects += 1
                    out.bytes += st.st_size
        return out


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """The build root's lock: one build or prune at a time (a second one waits)."""
    Path(root).mkdir(parents=True, exist_ok=True)
    fd = os.open(Path(root) / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

"""Fits kept between builds, keyed by the content of what they read and the code that computes them.

A fit (the season model, the geography read from its outlines) depends on some input files
and some code. `cached(name, data_dir, inputs, code, compute)` hashes exactly those (file
bytes, not times) into a key and returns the result stored under it by an earlier build, or
computes and stores it. A new month of rainfall therefore refits only what rainfall enters:
a fit whose declared inputs did not change is read back, not recomputed.

The cache is active only inside `use(root)` (the build opens it under `OUT/cache`, outside
every release); elsewhere `cached` simply computes. One entry per name is kept (the latest),
so the cache stays the size of one build's fits. An unreadable entry is recomputed. Results
are pickled: the cache is the build's own, never an input from elsewhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from pipeline.buildkey import source_files
from pipeline.settings import REPO_ROOT

T = TypeVar("T")
CACHE_DIR = "cache"  # under the build root (OUT/cache), outside every release
LOCAL_DIR = "local"  # OUT/cache/local: entries for this build root only (`cached(..., local=True)`)
FORMAT = b"malaria-risk fit cache 1\n"

_ROOT: ContextVar[Path | None] = ContextVar("fit_cache_root", default=None)
_HASHES: dict[tuple[str, int, int, int], str] = {}  # (path, size, mtime, inode) -> SHA-256, for one process


def _sha_file(path: Path) -> str:
    st = path.stat()
    memo = (str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    hit = _HASHES.get(memo)
    if hit is None:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        hit = _HASHES[memo] = h.hexdigest()
    return hit


def _walk(path: Path) -> list[Path]:
    return [path] if path.is_file() else source_files(path)


def content_key(name: str, data_dir: Path, inputs: Iterable[str], code: Iterable[Path], extra: str = "") -> str:
    """SHA-256 over the fit's name, each input (a file or directory under `data_dir`, "absent" when
    missing), each code file or directory, by content, and `extra` (a digest of arguments)."""
    h = hashlib.sha256(FORMAT + name.encode() + b"\n" + extra.encode() + b"\n")
    for rel in sorted(set(inputs)):
        path = Path(data_dir) / rel
        files = _walk(path) if path.exists() else []
        h.update(f"input\t{rel}\t{len(files)}\n".encode())
        for f in files:
            h.update(f"{f.relative_to(data_dir).as_posix()}\t{_sha_file(f)}\n".encode())
    for c in sorted({Path(c).resolve() for c in code}):
        for f in _walk(c):
            h.update(f"code\t{f.relative_to(REPO_ROOT).as_posix() if f.is_relative_to(REPO_ROOT) else f}\t"
                     f"{_sha_file(f)}\n".encode())
    return h.hexdigest()


@contextlib.contextmanager
def use(root: Path) -> Iterator[Path]:
    """Activate the cache under `root` for the fits inside the block (one build)."""
    token = _ROOT.set(Path(root))
    try:
        yield Path(root)
    finally:
        _ROOT.reset(token)


def cached(name: str, data_dir: Path, inputs: Iterable[str], code: Iterable[Path], compute: Callable[[], T],
           extra: str = "", *, local: bool = False) -> T:
    """`compute()`, or what it returned in an earlier build with the same inputs and code.

    `inputs` must name every file (or directory) under the data directory the computation reads,
    and `code` the modules and packages it runs: the key is made of exactly these, so a file left
    out would let a stale fit through. A `local` entry is kept under `LOCAL_DIR`, for the builds of
    this root only: the scheduled job carries the top-level entries in its bucket state, and a large
    entry that spares a new month a second or less is not worth its upload there.
    """
    root = _ROOT.get()
    if root is None:
        return compute()
    if local:
        root = root / LOCAL_DIR
    key = content_key(name, data_dir, inputs, code, extra)
    path = root / f"{name}-{key[:32]}.pickle"
    with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError), \
            open(path, "rb") as f:
        return pickle.load(f)  # noqa: S301 (written by this cache, under the build root)
    value = compute()
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{path.name}.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        with contextlib.suppress(OSError):
            tmp.unlink()
        return value
    for old in root.glob(f"{name}-*.pickle"):  # one entry per fit: the latest
        if old != path:
            with contextlib.suppress(OSError):
                old.unlink()
    return value


def call(name: str, code: Iterable[Path], fn: Callable[..., T], *args: Any, local: bool = False,
         **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` for a pure function of its arguments, cached by their content (pickled
    bytes: numpy arrays and plain data pickle the same way every time) and the code in `code`."""
    if _ROOT.get() is None:
        return fn(*args, **kwargs)
    digest = hashlib.sha256(pickle.dumps((args, sorted(kwargs.items())), protocol=5)).hexdigest()
    return cached(name, Path("."), [], code, lambda: fn(*args, **kwargs), extra=digest, local=local)


def columns(name: str, code: Iterable[Path], keys: list[str], compute: Callable[[list[int]], list[T]]) -> list[T]:
    """`compute(positions)` (one result per position asked for) for the positions of `keys` whose result
    no earlier build of this root kept, and the kept result for the others.

    For a computation made column by column, each column a function of its own inputs (`keys[i]`:
    a digest of them): a new month adds a column and leaves the others' inputs as they were, so only
    the new columns are computed. The entry holds the latest build's columns (under `LOCAL_DIR`: it is
    this root's) and is keyed by the code as well, so a change of code computes every column again."""
    root = _ROOT.get()
    if root is None:
        return compute(list(range(len(keys))))
    digest = content_key(name, Path("."), [], code)
    path = root / LOCAL_DIR / f"{name}.pickle"
    kept: dict[str, Any] = {}
    with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError,
                             ValueError), open(path, "rb") as f:
        code_key, got = pickle.load(f)  # noqa: S301 (written by this cache, under the build root)
        if code_key == digest and isinstance(got, dict):
            kept = got
    missing = [i for i, k in enumerate(keys) if k not in kept]
    fresh = dict(zip(missing, compute(missing), strict=True)) if missing else {}
    out = [fresh[i] if i in fresh else kept[k] for i, k in enumerate(keys)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            pickle.dump((digest, dict(zip(keys, out, strict=True))), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        with contextlib.suppress(OSError):
            tmp.unlink()
    return out


def code_of(*modules: str) -> list[Path]:
    """Source paths of dotted module or package names (a package: its whole directory)."""
    out = []
    for m in modules:
        base = REPO_ROOT / Path(*m.split("."))
        out.append(base if base.is_dir() else base.with_suffix(".py"))
    return out

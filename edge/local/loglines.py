"""Log lines written off the serving path: the local server never waits for whoever reads its log.

A line is appended to a bounded deque (no lock, no wake-up: tens of nanoseconds) and a daemon
thread writes what has gathered every `interval` seconds, in chunks of whole lines no larger
than PIPE_BUF, so each write to a pipe is atomic and the lines of several worker processes
sharing one stderr never interleave. If the reader stalls (a full pipe, a paused terminal),
the writer blocks, the serving thread does not: once `max_lines` wait, the oldest are dropped
and counted, and a line saying how many were dropped follows when writing resumes.
"""

from __future__ import annotations

import atexit
import os
import select
import threading
from collections import deque

from ..accesslog import event_line

PIPE_BUF = getattr(select, "PIPE_BUF", 4096)


class BackgroundLines:
    def __init__(self, fd: int = 2, max_lines: int = 10_000, interval: float = 0.2):
        self.fd = fd
        self.max_lines = max_lines
        self.interval = interval
        self._lines: deque[str] = deque(maxlen=max_lines)
        self.dropped = 0  # lines pushed out unwritten by newer ones
        self._reported = 0
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._lock = threading.Lock()  # one flush at a time (the thread, or atexit)
        self._stopped = False

    def __call__(self, text: str) -> None:
        lines = self._lines
        if len(lines) == self.max_lines:
            self.dropped += 1
        lines.append(text)
        if self._thread is None:
            self._start()

    def _start(self) -> None:
        # started on first use, in the process that serves (workers are started after the settings
        # are read, so a thread made earlier would not be theirs)
        self._thread = threading.Thread(target=self._run, name="log-lines", daemon=True)
        self._thread.start()
        atexit.register(self._flush_at_exit)

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait(self.interval)
            self._wake.clear()
            self.flush()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is left and end the thread (tests; a server's process just exits)."""
        self._stopped = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def flush(self) -> None:
        with self._lock:
            self._drain(guarded=False)

    def _flush_at_exit(self) -> None:
        """What is left, without ever holding up the process's exit: if the writer is stuck on a
        reader that stopped reading, or the log cannot take more now, the rest is dropped."""
        if not self._lock.acquire(timeout=0.5):
            return
        try:
            self._drain(guarded=True)
        finally:
            self._lock.release()

    def _drain(self, guarded: bool) -> None:
        lines = self._lines
        chunk: list[bytes] = []
        size = 0
        while lines:
            b = (lines.popleft() + "\n").encode("utf-8", "replace")
            if size + len(b) > PIPE_BUF and chunk:
                if not self._write(b"".join(chunk), guarded):
                    return
                chunk, size = [], 0
            chunk.append(b)
            size += len(b)
        if chunk and not self._write(b"".join(chunk), guarded):
            return
        if self.dropped != self._reported:
            self._write((event_line("access_log_dropped", lines=self.dropped - self._reported,
                                    reason="the log reader fell behind") + "\n").encode(), guarded)
            self._reported = self.dropped

    def _write(self, data: bytes, guarded: bool = False) -> bool:
        """Write all of `data`; False when `guarded` and the log cannot take it within 0.2 s, or it is gone."""
        if guarded:
            try:
                _, ready, _ = select.select([], [self.fd], [], 0.2)
            except (OSError, ValueError):
                return False
            if not ready:  # a chunk is at most PIPE_BUF: a writable pipe takes it without blocking
                return False
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except InterruptedError:
                continue
            except OSError:
                return False  # the log is gone (closed pipe): serving goes on without it
            view = view[n:]
        return True

"""The parent's side of one sandbox worker process: start it, send a request, read its reply frame by frame,
and stop a query by its CPU time (the rule is :mod:`.sandbox`'s module docstring; the child is :mod:`._worker`).
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
import time

from ..errors import InfrastructureError
from . import _worker
from .result import Limits

_KILL_GRACE_S = 0.5  # how long after the deadline a silent worker's CPU time is first read
_STARVED_CAP_EXTRA_S = 1.5  # the wall-clock cap of a starved query: 2 x timeout_s + this
_CPU_POLL_S = 0.1  # the shortest wait between two readings of a starved worker's CPU time
_REPLY_READ_S = 30.0  # a reply (or one frame of it) that has started arriving must finish within this
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# glibc's malloc keeps freed big blocks in the heap once it has seen one freed; a fixed threshold returns them.
_WORKER_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "131072"}


class SandboxError(InfrastructureError):
    """The sandbox itself failed (a worker that cannot start): infrastructure, never a verdict."""


def _limits_key(limits: Limits) -> tuple:
    """The limits a result depends on, in the order the worker's request carries them."""
    return (limits.timeout_s, limits.max_ops, limits.max_rows, limits.max_result_bytes)


class _Outcome:
    """Why :meth:`_Worker.request` got no reply: the worker died, or the parent stopped it (``cpu_s``: the CPU
    time it had used on the query; ``starved``: it never got ``timeout_s`` of CPU before the wall-clock cap)."""

    def __init__(self, died: bool, cpu_s: float = 0.0, starved: bool = False, signal: int | None = None):
        self.died, self.cpu_s, self.starved, self.signal = died, cpu_s, starved, signal


class _Worker:
    """One supervised worker process; used by one thread at a time."""

    def __init__(self, memory_mb: int | None, max_connections: int) -> None:
        self.memory_mb = memory_mb
        self.max_connections = max_connections
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.cpu_total = 0.0  # the worker's CPU seconds at the end of its last reply (0 for a new one)
        self._stderr = None

    def _start(self) -> subprocess.Popen:
        memory = str(self.memory_mb) if self.memory_mb else "none"
        cmd = [sys.executable, "-I", _worker.__file__, memory, str(self.max_connections)]
        if self._stderr is None:
            self._stderr = tempfile.TemporaryFile()
        self._stderr.seek(0)
        self._stderr.truncate()
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                close_fds=True,
                env={**os.environ, **_WORKER_MALLOC},
            )
        except OSError as err:
            raise SandboxError(f"cannot start a sandbox worker ({cmd[0]}): {err}") from err
        self.cpu_total = 0.0
        return proc

    def stderr_tail(self, limit: int = 2000) -> str:
        """The end of what the last worker process wrote to stderr (for diagnosing infrastructure failures)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", errors="replace")[-limit:]

    def kill(self) -> int | None:
        """Kill the process (if any); its exit status (negative: the signal that ended it)."""
        code = None
        if self.proc is not None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            code = self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.proc = None
        return code

    def close(self) -> None:
        self.kill()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def request(self, db_path: str, sql: str, limits: Limits) -> tuple | _Outcome:
        """Run one query: the reply tuple (:mod:`._worker`, rows gathered from its frames), or an
        :class:`_Outcome` when there is none (module docstring: the CPU time decides)."""
        timeout = limits.timeout_s
        started = time.monotonic()
        if not self._send(("run", db_path, sql, *_limits_key(limits))):
            return _Outcome(died=True, signal=self.kill())
        fd = self.proc.stdout.fileno()
        cap = started + 2 * timeout + _STARVED_CAP_EXTRA_S
        wait_until = started + timeout + _KILL_GRACE_S
        while True:
            try:
                header = self._read(fd, 8, wait_until)
            except EOFError:
                return _Outcome(died=True, signal=self.kill())
            if header is not None:
                break
            cpu = self._cpu_s() - self.cpu_total  # inside one SQLite step (no progress handler), or starved
            now = time.monotonic()
            if cpu >= timeout or now >= cap:  # at the cap, half the CPU time is "most of it"
                self.kill()
                return _Outcome(died=False, cpu_s=cpu, starved=cpu < timeout / 2)
            wait_until = min(cap, now + max(timeout - cpu, _CPU_POLL_S))  # it cannot use its CPU time sooner
        reply = self._finish(fd, header)
        if reply is None:
            return _Outcome(died=True, signal=self.kill())
        self.cpu_total = reply[8]
        return reply

    def _finish(self, fd: int, header: bytes | None) -> tuple | None:
        reply = self._message(fd, header)
        if reply is None or not reply[9]:
            return reply
        rows: list = []
        for _ in range(reply[9]):  # a big result, frame by frame
            frame = self._message(fd, None)
            if frame is None:
                return None
            rows += frame
            del frame
        return (reply[0], rows, *reply[2:])

    def _message(self, fd: int, header: bytes | None):
        """The next message (after ``header`` when it was read already), or None when the worker died or
        stalled."""
        try:
            if header is None:
                header = self._read(fd, 8, time.monotonic() + _REPLY_READ_S)
                if header is None:
                    return None
            body = self._read(fd, struct.unpack(">Q", header)[0], time.monotonic() + _REPLY_READ_S)
        except EOFError:
            return None
        return None if body is None else pickle.loads(body)

    def _cpu_s(self) -> float:
        """The worker process's CPU seconds so far (user + system)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        except (OSError, IndexError, ValueError):  # no /proc (not Linux): ask psutil
            pass
        try:
            import psutil
        except ImportError:  # no way to read it: assume the worker was not starved
            return float("inf")
        try:
            times = psutil.Process(self.proc.pid).cpu_times()
        except psutil.Error:  # the process is gone
            return float("inf")
        return times.user + times.system

    def call(self, message: tuple, wait_s: float) -> tuple | None:
        """Send one request (see :mod:`._worker`); the reply, or None when none began within ``wait_s``
        (the worker is then killed) or the worker died."""
        if not self._send(message):
            self.kill()
            return None
        fd = self.proc.stdout.fileno()
        try:
            header = self._read(fd, 8, time.monotonic() + wait_s)
        except EOFError:
            header = None
        reply = None if header is None else self._message(fd, header)
        if reply is None:
            self.kill()
        return reply

    def _send(self, message: tuple) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.restarts += 1
                self.kill()
            self.proc = self._start()
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(struct.pack(">Q", len(payload)) + payload)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    @staticmethod
    def _read(fd: int, n: int, deadline: float) -> bytes | None:
        """``n`` bytes, or None when they did not come by ``deadline``; EOFError when the worker died."""
        chunks, remaining = [], n
        while remaining:
            wait = deadline - time.monotonic()
            if wait <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                raise EOFError("the sandbox worker died")
            chunks.append(chunk)
            remaining -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

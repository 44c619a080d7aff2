"""One child process of the control plane: started with its log file, stopped with SIGTERM then SIGKILL.

Children ask Linux to SIGTERM them when the process that started them dies, so an interrupted test
run or a killed ``muster k8s up`` leaves no etcd or API server behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def tail(path: Path, limit: int = 3000) -> str:
    """The end of a log file, for error messages."""
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


@dataclass
class Process:
    """A named child process whose output goes to ``log_path``."""

    name: str
    argv: list[str]
    log_path: Path
    #: the environment (None: this process's) and working directory (None: this one's) of the child
    env: dict[str, str] | None = None
    cwd: Path | None = None
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=self.env, cwd=self.cwd, preexec_fn=_die_with_parent)

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def exit_code(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def stop(self, grace_s: float = 10.0) -> None:
        popen = self.popen
        if popen is None or popen.poll() is not None:
            return
        popen.terminate()
        try:
            popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()

    def kill(self) -> None:
        """SIGKILL at once (a crash, for tests)."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

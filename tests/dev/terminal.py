"""A real terminal for the tests of `hpctrain dev`: a tmux server of the test's own (its own
socket, so that it starts with the test's environment), typed into and read back."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.waits import wait_for


class Terminal:
    """One tmux session running bash in `cwd` with `env`."""

    def __init__(self, name: str, env: dict[str, str], cwd: Path) -> None:
        self.socket = f"hpctrain-test-{name}-{os.getpid()}"
        self.env = env
        self.tmux("new-session", "-d", "-s", "t", "-x", "200", "-y", "50", "-c", str(cwd),
                  "bash --norc --noprofile -i")

    def tmux(self, *args: str) -> str:
        return subprocess.run(("tmux", "-L", self.socket, *args), env=self.env, check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-t", "t", "-l", line)
        self.tmux("send-keys", "-t", "t", "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-2000", "-t", "t")

    def wait_for(self, text: str, timeout_s: float, count: int = 1) -> str:
        """The screen once `text` shows on it `count` times."""
        return wait_for(self.screen, timeout_s, f"{text!r} x{count} on the terminal",
                        until=lambda s: s.count(text) >= count, poll_s=0.1)

    def close(self) -> None:
        subprocess.run(("tmux", "-L", self.socket, "kill-server"), env=self.env,
                       capture_output=True, check=False, timeout=10)


def wait_file(path: Path, timeout_s: float) -> str:
    """A file's text once it exists and is not empty."""
    return wait_for(lambda: path.read_text() if path.exists() else "", timeout_s,
                    f"{path} written", until=bool, poll_s=0.1)


def elapsed(since: float) -> float:
    return time.monotonic() - since

"""Long commands draw a progress bar on a terminal and nothing when their output is piped."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import threading

from adslot.progress import progress_bar


def on_terminal(*args: str, timeout: float = 120) -> tuple[int, bytes, bytes]:
    """Run `adslot ARGS` with standard error on a terminal (a pty) and standard output on a pipe: (exit code,
    standard output, what the terminal received)."""
    main_fd, side_fd = pty.openpty()
    drawn = bytearray()

    def read_terminal() -> None:  # as a terminal does, or the child blocks on a full one
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # the other side closed: all read
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=read_terminal)
    reader.start()
    command = [sys.executable, "-c", "from adslot.cli import main; main()", *args]
    try:
        with subprocess.Popen(command, stdin=side_fd, stdout=subprocess.PIPE, stderr=side_fd) as child:
            os.close(side_fd)
            stdout, _ = child.communicate(timeout=timeout)
    finally:
        reader.join(timeout=10)
        os.close(main_fd)
    return child.returncode, stdout, bytes(drawn)


def test_piped_output_gets_no_progress() -> None:
    piped = io.StringIO()
    with progress_bar("Working", piped) as progress:
        for share in (0.0, 0.25, 0.5, 1.0):
            progress(share)
    assert piped.getvalue() == ""


def test_a_terminal_gets_a_bar_that_moves_to_the_end() -> None:
    main_fd, side_fd = pty.openpty()
    with os.fdopen(side_fd, "w") as terminal:
        assert terminal.isatty()
        with progress_bar("Working", terminal) as progress:
            for share in (0.1, 0.5, 0.5, 1.0):
                progress(share)
                terminal.flush()
    drawn = bytearray()
    while True:  # the other side is closed: read what it wrote, up to the error that says so
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        drawn.extend(chunk)
    os.close(main_fd)
    text = drawn.decode()
    assert "Working" in text and "100%" in text, text
    assert "50%" in text or "#" in text

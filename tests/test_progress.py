"""Long commands draw a progress bar on a terminal and nothing when their output is piped."""

from __future__ import annotations

import io
import os
import pty

from adslot.progress import progress_bar


def test_piped_output_gets_no_progress() -> None:
    piped = io.StringIO()
    with progress_bar("Working", piped) as progress:
        for share in (0.0, 0.25, 0.5, 1.0):
            progress(share)
    assert piped.getvalue() == ""


def test_a_terminal_gets_a_bar_that_moves_to_the_end() -> None:
    main, side = pty.openpty()
    try:
        with os.fdopen(side, "w", closefd=False) as terminal:
            assert terminal.isatty()
            with progress_bar("Working", terminal) as progress:
                for share in (0.1, 0.5, 0.5, 1.0):
                    progress(share)
                    terminal.flush()
        drawn = os.read(main, 65536).decode()
    finally:
        os.close(main)
        os.close(side)
    assert "Working" in drawn and "100%" in drawn, drawn
    assert "50%" in drawn or "#" in drawn

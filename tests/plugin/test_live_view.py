"""LiveView inside another program's line: the panel draws below it and, gone, leaves the
screen exactly as the program would have had it, cursor included.

The program's bytes and the panel's are played into a pyte screen; the screen after
"program, panel, program" must equal the screen after "program, program".
"""

from __future__ import annotations

import io

import pyte
import pytest
from rich.console import Console

from hilbench.console import LiveView, Progress

WIDTH, HEIGHT = 80, 24  # the panel takes 5 lines at any width
TITLE = "hilbench · mlp on digits"
PROGRESS = Progress(step=7, q=2, loss=2.25, accuracy=0.5, forward_passes=28, budget=200)


def play(chunks: list[bytes], width: int, height: int) -> tuple[list[str], tuple[int, int]]:
    """Every line written (scrollback first, trailing blank lines dropped) and the cursor as
    (column, line number counted from the first line written)."""
    screen = pyte.HistoryScreen(width, height, history=1000)
    stream = pyte.ByteStream(screen)
    for chunk in chunks:
        stream.feed(chunk)
    rows = [*screen.history.top, *(screen.buffer[y] for y in range(height))]
    lines = ["".join(row[x].data for x in range(width)).rstrip() for row in rows]
    cursor = (screen.cursor.x, len(screen.history.top) + screen.cursor.y)
    while lines and not lines[-1] and len(lines) > cursor[1] + 1:
        lines.pop()
    return lines, cursor


def panel_bytes(column: int, width: int = WIDTH, height: int = HEIGHT) -> bytes:
    """What a transient LiveView writes when the program left its cursor at ``column``
    (the tty turns the newlines rich writes into CR LF, as a terminal's ONLCR does)."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=width, height=height)
    view = LiveView(console, transient=True, column=lambda: column)
    view.start(TITLE)
    view.update(PROGRESS)
    view.finish()
    return out.getvalue().replace("\n", "\r\n").encode()


@pytest.mark.parametrize("width", [80, 33])  # at 33 columns the table wraps its cells
@pytest.mark.parametrize("lines_above", [0, 3, HEIGHT - 1], ids=["top", "middle", "bottom"])
@pytest.mark.parametrize("at", [0, 1, 26, -1, 1.0, 5, 2.0, 3], ids=str)
def test_the_program_line_and_cursor_are_as_if_no_panel_was_shown(width, lines_above, at):
    """``at``: the program's column; a float f is f line widths (a line that fills 1 or 2 rows
    exactly), -1 one short of the width, 5 and 3 past one or two rows."""
    column = {-1: width - 1, 5: width + 5, 3: 2 * width + 3}.get(at, at)
    column = int(at * width) if isinstance(at, float) else column
    before = b"".join(b"line %d\r\n" % i for i in range(lines_above)) + b"x" * column
    after = b"PASSED [ 33%]\r\nnext line"
    panel = panel_bytes(column, width)
    assert TITLE.encode() in panel  # it was drawn

    with_panel = play([before, panel, after], width, HEIGHT)
    without = play([before, after], width, HEIGHT)
    assert with_panel == without


def test_without_room_below_the_line_nothing_is_written():
    # the panel is 5 lines; with the program's line and 3 spare lines it needs 9
    assert LiveView.HEIGHT == 5
    assert panel_bytes(10, height=8) == b""
    assert panel_bytes(10, height=9) != b""
    assert panel_bytes(3 * WIDTH, height=10) == b""  # a line wrapped over 3 rows takes 3


def test_a_persistent_panel_is_left_on_screen():
    """``hilbench run`` keeps its last panel: no erasing, no cursor games."""
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=True, width=WIDTH, height=HEIGHT))
    view.start(TITLE)
    view.update(PROGRESS)
    view.finish()
    lines, _ = play([out.getvalue().replace("\n", "\r\n").encode()], WIDTH, HEIGHT)
    assert lines[0] == TITLE
    assert any("28/200" in line for line in lines)

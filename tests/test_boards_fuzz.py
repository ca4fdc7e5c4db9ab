"""Fuzzing the board-file loader (issue 7: every parser gets fuzzed).

Board files are parsed in Python (boards.py), so the fuzzer is hypothesis rather
than libFuzzer: shipped board files mutated at random — bytes flipped, lines cut
or duplicated, values replaced by other YAML types — must either load into a Board
or raise BoardError naming the file; any other exception is a bug.
"""
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgerun import boards, errors

SHIPPED = sorted(boards.boards_dir().glob("*.yaml"))
TEXTS = [p.read_text() for p in SHIPPED]
VALUES = st.sampled_from(["", "~", "[]", "{}", "-1", "0", "1e999", "'x'", "[1, [2]]", "{a: {b: c}}",
                          "yes", "!!binary AA==", "&a [*a]", "\"\\u0000\"", "9" * 40])


@st.composite
def mutated_board(draw):
    lines = draw(st.sampled_from(TEXTS)).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["cut", "dup", "value", "flip", "indent"]))
        if op == "cut":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "value" and ":" in lines[i]:
            key = lines[i].split(":", 1)[0]
            lines[i] = f"{key}: {draw(VALUES)}"
        elif op == "flip" and lines[i]:
            j = draw(st.integers(0, len(lines[i]) - 1))
            lines[i] = lines[i][:j] + chr(draw(st.integers(1, 0x2FF))) + lines[i][j + 1:]
        elif op == "indent":
            lines[i] = "  " + lines[i]
        if not lines:
            break
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(not SHIPPED, reason="no board files")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mutated_board())
def test_mutated_board_files_load_or_raise_board_error(tmp_path, text):
    path = tmp_path / "fuzzed.yaml"
    path.write_text(text)
    try:
        board = boards.load_file(path)
    except errors.BoardError as e:
        assert "fuzzed.yaml" in str(e), str(e)
        assert "\n" not in str(e).strip(), "one line, please: " + str(e)
    else:
        assert isinstance(board, boards.Board)

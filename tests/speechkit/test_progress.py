"""speechkit.progress: a bar is drawn on a terminal only, never when quiet; the command
lines' inputs get one in seconds of audio while their per-input lines stay."""

from __future__ import annotations

import io
import types

import pytest

from speechkit import progress, stream_cli


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def loud(monkeypatch):
    """Bars on (not quiet, STJ_QUIET unset), and again after the test."""
    monkeypatch.delenv("STJ_QUIET", raising=False)
    progress.quiet(False)
    yield
    progress.quiet(False)


def _drawn(stream, monkeypatch) -> str:
    monkeypatch.setattr("sys.stderr", stream)
    with progress.bar(3, "render", "item") as shown:
        shown.update(3)
    return stream.getvalue()


def test_a_bar_is_drawn_on_a_terminal_only(loud, monkeypatch):
    assert "render" in _drawn(_Terminal(), monkeypatch)  # count, rate and time left
    assert "0/3" in _drawn(_Terminal(), monkeypatch)  # its first line (then rate-limited)
    assert _drawn(io.StringIO(), monkeypatch) == ""  # a pipe or a log file
    progress.quiet()
    assert _drawn(_Terminal(), monkeypatch) == ""
    progress.quiet(False)
    monkeypatch.setenv("STJ_QUIET", "1")
    assert _drawn(_Terminal(), monkeypatch) == ""


def test_several_inputs_get_a_bar_and_their_lines(loud, monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    args = types.SimpleNamespace(quiet=False, keep_going=False)
    skipped = stream_cli.run_inputs(["a.wav", "b.wav"], lambda name: (2, 1.0), args, (), "x")
    assert skipped == []
    text = terminal.getvalue()
    assert "[1/2] a.wav: 2 x in 1.0 s of audio" in text and "[2/2] b.wav" in text
    assert "[2/2] b.wav: 0s" in text  # the bar: seconds of audio, the input being read
    quiet = _Terminal()
    monkeypatch.setattr("sys.stderr", quiet)
    args.quiet = True
    stream_cli.run_inputs(["a.wav", "b.wav"], lambda name: (2, 1.0), args, (), "x")
    assert quiet.getvalue() == ""

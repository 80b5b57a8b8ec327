"""An error as the one line a log, a doctor line or a chat note shows (``teleton.text.lines.reason``): every
layer that reports a failure it goes on past uses it."""

from __future__ import annotations

from teleton.text.lines import reason


def test_an_error_is_one_line_cut_at_its_cap() -> None:
    error = ValueError("Protobuf parsing failed.\n  at model.onnx\n" + "x" * 500)
    assert reason(error, 200) == ("Protobuf parsing failed. at model.onnx " + "x" * 500)[:200]


def test_an_error_that_says_nothing_is_named_by_its_type() -> None:
    # A timeout says nothing (str() is ""): the line that reports it must not fail itself.
    assert reason(TimeoutError(), 200) == "TimeoutError"
    assert reason(OSError("  \n "), 200) == "OSError"

"""Text from outside shown to a person is shown as text: a sample key, a file or folder name, a
label, a server's message or a run file's field that holds ESC, BEL, a newline, C1 or a bidi
override reaches a terminal, a log line or an HTML page escaped (``\\x1b``, ``\\n``, ``\\u202e``)
and bounded, never raw. A normal name reads as it always did."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from stoker.observe import read_exclusions
from stoker_testbed.data.images import jpeg
from tests.faults.inputs.test_untrusted_ledger import bench_run

ROOT = Path(__file__).resolve().parents[3]
# What a terminal or a log reader acts on: C0 (newline and tab included), DEL, C1, bidi controls,
# line and paragraph separators, and lone surrogates (print raises on them).
RAW = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
# The same, newlines allowed: a command's output over several lines.
RAW_IN_LINES = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
TITLE = "\x1b]0;owned\x07"  # rewrites a terminal's title
CLEAR = "\x1b[2J\x1b[H"  # clears its screen


@given(value=st.text() | st.binary(), limit=st.integers(2, 400))
@example(value="\x1b" * 1000, limit=10)
@example(value="x" * 10**6, limit=300)
@example(value=b"\xff\xfe" + "\udcff".encode("utf-8", "surrogatepass"), limit=50)
def test_shown_text_has_no_control_character_and_keeps_its_bound(value: str | bytes, limit: int) -> None:
    from stoker._bounded import shown, shown_html

    text = shown(value, limit)
    assert RAW.search(text) is None and len(text) <= limit
    text.encode("utf-8")  # printable on any UTF-8 terminal (no lone surrogate)
    if isinstance(value, str) and RAW.search(value) is None and len(value) <= limit:
        assert text == value, "a normal name reads as it always did"
    assert "<" not in shown_html(value, limit) and ">" not in shown_html(value, limit)


@given(name=st.sampled_from(["cat/001.jpg", "données/été.png", "中文/图片.webp", "a b-c_d.e", "C:\\data\\x.jpg"]))
def test_a_normal_name_is_unchanged(name: str) -> None:
    from stoker._bounded import shown

    assert shown(name) == name and shown(name.encode()) == name


def test_a_warning_names_a_folder_from_outside_escaped_on_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / f"run{CLEAR}\nWARNING forged"
    folder.mkdir()
    (folder / "exclusions-rank-00000.jsonl").write_text("not a record\n")
    with caplog.at_level(logging.WARNING, logger="stoker.observe"):
        assert read_exclusions(folder) == []
    (message,) = [record.getMessage() for record in caplog.records]
    assert RAW.search(message) is None, repr(message)
    assert "run\\x1b[2J\\x1b[H\\nWARNING forged" in message and "line 1: not an exclusion record" in message


def test_a_logged_traceback_is_shown_escaped_with_its_lines_kept(caplog: pytest.LogCaptureFixture) -> None:
    from stoker._bounded import shown_logger

    logger = shown_logger("stoker.test")
    try:
        raise ValueError(f"bad sample {TITLE}")
    except ValueError:
        with caplog.at_level(logging.ERROR, logger="stoker.test"):
            logger.exception("reading %s failed", f"key{TITLE}")
    text = caplog.text
    assert RAW_IN_LINES.search(text) is None, repr(text)
    assert "key\\x1b]0;owned\\x07" in text and "ValueError: bad sample \\x1b]0;owned\\x07" in text and "Traceback" in text


def _run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stoker.cli", *arguments], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_inspect_shows_class_names_from_folders_escaped(tmp_path: Path) -> None:
    for name in (f"cat{TITLE}", "dog\u202egnp.exe"):
        (tmp_path / "data" / name).mkdir(parents=True)
        (tmp_path / "data" / name / "0.jpg").write_bytes(jpeg(16, 16, seed=1))
    done = _run("inspect", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    assert RAW_IN_LINES.search(done.stdout) is None, repr(done.stdout)
    assert "cat\\x1b]0;owned\\x07" in done.stdout and "dog\\u202egnp.exe" in done.stdout
    assert json.loads(_run("inspect", str(tmp_path / "data"), "--json").stdout)["labels"] == {f"cat{TITLE}": 1, "dog\u202egnp.exe": 1}


def test_convert_names_the_samples_it_left_out_escaped(tmp_path: Path) -> None:
    (tmp_path / "data" / "cat").mkdir(parents=True)
    (tmp_path / "data" / "cat" / "good.jpg").write_bytes(jpeg(16, 16, seed=1))
    (tmp_path / "data" / "cat" / f"bad{CLEAR}.jpg").write_bytes(b"not an image")
    done = _run("convert", str(tmp_path / "data"), str(tmp_path / "shards"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert RAW_IN_LINES.search(done.stdout) is None, repr(done.stdout)
    assert "  - cat/bad\\x1b[2J\\x1b[H.jpg: " in done.stdout, done.stdout


def test_a_failure_record_shows_its_sample_and_error_escaped_and_bounded() -> None:
    from stoker.failures import Failure

    failure = Failure(f"cat/x{TITLE}.jpg", "decode", f"ImageDecodeError: {CLEAR}" + "y" * 10**6, "skipped")
    line = str(failure)
    assert RAW.search(line) is None and len(line) < 2_000, line[:300]
    assert line.startswith("'cat/x\\x1b]0;owned\\x07.jpg' (stage 'decode'): ImageDecodeError: \\x1b[2J\\x1b[H")
    assert str(Failure("cat/x.jpg", "decode", "ImageDecodeError: truncated", "skipped")) == (
        "'cat/x.jpg' (stage 'decode'): ImageDecodeError: truncated -> skipped"
    )


def test_a_report_page_shows_a_run_files_text_escaped(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    hostile = f"stoker{TITLE}\u202egnp.exe"
    run = bench_run(dataset=hostile, diagnosis={"bottleneck": hostile, "message": CLEAR})
    run["results"][0]["name"] = hostile
    (tmp_path / "run.json").write_text(json.dumps(run))
    from stoker.observe import write_report

    page = write_report(tmp_path / "run.json", tmp_path / "out").read_text()
    assert RAW_IN_LINES.search(page) is None, repr(page[:500])
    assert "stoker\\x1b]0;owned\\x07\\u202egnp.exe" in page and "\\x1b[2J\\x1b[H" in page

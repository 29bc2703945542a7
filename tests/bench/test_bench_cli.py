"""`stoker bench` and `stoker report` end to end on tiny data; the page renders in Chromium."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stoker.cli import main


class _Sources(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        values = dict(attributes)
        if tag == "img" and values.get("src"):
            self.sources.append(values["src"])  # type: ignore[arg-type]
        if values.get("id"):
            self.ids.add(values["id"])  # type: ignore[arg-type]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_bench_prints_the_table_and_diagnosis_and_writes_a_run(tmp_path: Path, capsys) -> None:
    run_file = tmp_path / "run.json"
    assert main(["bench", "--images", "64", "--duration", "2", "--no-peers", "--quiet", "--json", str(run_file)]) == 0
    out = capsys.readouterr().out
    assert "stoker.Loader" in out and "images/s" in out and "diagnosis:" in out
    run = json.loads(run_file.read_text())
    assert run["format"] == "stoker.bench-run" and run["results"][0]["images_per_second"] > 0
    assert run["diagnosis"]["bottleneck"] and run["diagnosis"]["message"]

    assert main(["report", str(run_file), "--out", str(tmp_path / "report")]) == 0
    page = tmp_path / "report" / "index.html"
    parser = _Sources()
    parser.feed(page.read_text())
    assert {"diagnosis", "results", "peers", "samples", "busy", "wait"} <= parser.ids
    for source in parser.sources:
        with Image.open(page.parent / source) as image:  # every referenced PNG exists and decodes
            image.load()
            assert image.size[0] > 100
    browser = _chromium()
    if browser is None:
        if os.environ.get("STOKER_REQUIRE_SERVERS"):
            pytest.fail("chromium is required in CI to check the report renders (apt-get install chromium)")
        pytest.skip("chromium not installed: the report page was not rendered (apt-get install chromium)")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1000,1400",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
    assert pixels.std() > 10, "the screenshot shows a page, not a blank"


def test_scenarios_print_their_tables(capsys) -> None:
    assert main(["bench", "--scenario", "padding"]) == 0
    padding = capsys.readouterr().out
    assert "naive padding" in padding and "best-fit packing" in padding
    assert main(["bench", "--scenario", "pinned"]) == 0
    pinned = capsys.readouterr().out
    assert "nothing measured" in pinned or ("pinned" in pinned and "GB/s" in pinned)


def test_bench_on_a_dead_s3_endpoint_fails_clearly(capsys, monkeypatch) -> None:
    from stoker_testbed.servers.server import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nobody")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "nothing")
    monkeypatch.setenv("STOKER_RETRY_DEADLINE", "2")  # opening waits at most 30 s, 2 here
    assert main(["bench", "s3://bucket/prefix", "--quiet"]) == 1
    error = capsys.readouterr().err
    assert "s3://bucket/prefix/dataset.json: gave up after" in error and "the retry deadline is 2 s" in error


def test_a_peer_that_delivers_nothing_fails_instead_of_showing_zero(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from stoker.bench import _peers

    monkeypatch.setitem(_peers.PEERS, "empty", lambda root, output: _peers.Arrivals())
    with pytest.raises(SystemExit, match="delivered no images"):
        _peers._child("empty", "uint8", tmp_path)


def test_bench_reports_the_shuffles_mixing_against_a_uniform_one(tmp_path: Path, capsys) -> None:
    from stoker.bench import image_folder
    from stoker.ingest import convert_storage
    from stoker.storage import FileStorage

    with FileStorage(image_folder(64)) as folder:
        convert_storage(folder, tmp_path / "shards", to="shards", shard_size=400_000, progress=False)
    arguments = ["bench", str(tmp_path / "shards"), "--duration", "1", "--no-peers", "--quiet"]
    assert main([*arguments, "--shuffle", "block", "--shuffle-window", "2"]) == 0
    block = capsys.readouterr().out
    assert "shuffle (block, window 2):" in block and "blocks per batch (uniform" in block
    assert main([*arguments, "--json", str(tmp_path / "run.json")]) == 0
    assert "shuffle (uniform):" in capsys.readouterr().out
    shuffle = json.loads((tmp_path / "run.json").read_text())["results"][0]["shuffle"]
    assert shuffle["scheme"] == "uniform" and shuffle["chosen"] == shuffle["uniform"], "the uniform shuffle is its own reference"


def test_every_argument_of_every_command_has_help() -> None:
    from stoker.cli import build_parser

    commands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    missing = [
        f"stoker {name} {action.dest}"
        for name, command in commands.choices.items()
        for action in command._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert not missing, f"arguments without help: {missing}"


def _mixed_folder(root: Path) -> Path:
    """An ImageFolder of JPEGs and PNGs with one corrupt JPEG, as users' folders are."""
    generator = np.random.default_rng(0)
    for index in range(24):
        folder = root / ("cats" if index % 2 else "dogs")
        folder.mkdir(parents=True, exist_ok=True)
        pixels = (generator.random((60, 80, 3)) * 255).astype("uint8")
        Image.fromarray(pixels).save(folder / f"{index:03d}.{'png' if index % 3 == 0 else 'jpg'}")
    (root / "cats" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    return root


def test_bench_on_a_users_folder_names_every_peer_and_each_bad_file_once(tmp_path: Path, capsys) -> None:
    from stoker.bench._peers import PEERS

    folder = _mixed_folder(tmp_path / "mixed")
    assert main(["bench", str(folder), "--duration", "1", "--quiet", "--images", "12"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"CPU \d+% of \d+ cores", out)
    for name in PEERS:  # compared, or named with the reason: never left out in silence
        assert name in out, f"{name} is neither compared nor named:\n{out}"
    from stoker.bench._folder import JPG_ONLY
    from stoker.bench._peers import available_peers

    for name in JPG_ONLY:  # not installed comes first; installed, it cannot read the PNGs
        reason = available_peers()[name] or "reads .jpg files only; 4 of the 12 images compared are not (.png 4)"
        assert f"not compared: {name} ({reason})" in out, out
    bad_lines = [line for line in out.splitlines() if "cats/broken.jpg (decode)" in line]
    assert len(bad_lines) == 1 and "corrupt JPEG" in bad_lines[0], out


def test_the_peers_view_of_a_dataset(tmp_path: Path) -> None:
    from stoker.bench._folder import peer_data

    remote = peer_data("s3://bucket/train", tmp_path / "a", 100)
    assert remote.root is None and all("is not one" in reason for reason in remote.reasons.values())
    flat = tmp_path / "flat"
    flat.mkdir()
    Image.fromarray(np.zeros((8, 8, 3), "uint8")).save(flat / "one.jpg")
    assert peer_data(str(flat), tmp_path / "b", 100).root is None, "no ROOT/CLASS/IMAGE layout: nobody can read it"
    folder = _mixed_folder(tmp_path / "mixed")
    scratch = tmp_path / "sample"
    scratch.mkdir()
    sample = peer_data(str(folder), scratch, 10, bad={"cats/broken.jpg"})
    assert sample.root == scratch
    linked = sorted(path.relative_to(scratch).as_posix() for path in scratch.glob("*/*"))
    assert len(linked) == 10 and "cats/broken.jpg" not in linked
    assert "a sample of 10 of the folder's 24 images" in sample.note and "without the 1" in sample.note


def test_a_short_run_still_draws_its_rate_and_peers_get_megabytes(tmp_path: Path) -> None:
    from stoker.observe._report import _loader_series, _row

    arrivals = [(0.05 * step, 32 * step) for step in range(1, 9)]  # a 0.4 s run
    [(name, times, rates)] = _loader_series([{"name": "stoker.Loader", "arrivals": arrivals}])
    assert times and all(rate == pytest.approx(640, rel=0.01) for rate in rates)
    peer = {
        "name": "PyTorch DataLoader (2 workers)",
        "images_per_second": 100.0,
        "peak_rss_mb": 900,
        "first_batch_seconds": 1.0,
        "cpu_percent": 150.0,
    }
    row = _row(peer, bytes_per_image=50_000, cores=2)
    assert "<td>5.0*</td>" in row and "<td>75%</td>" in row


def test_bench_on_a_text_corpus_reports_tokens_names_bad_lines_and_diagnoses(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("tokenizers")
    from stoker_testbed.data.text import make_corpus

    _, tokenizer = make_corpus(tmp_path / "corpus", documents=200, files=2)
    with open(tmp_path / "corpus" / "part-000.jsonl", "a") as file:
        file.write("this line is not json\n")
    run_file = tmp_path / "text-run.json"
    assert main(["bench", str(tmp_path / "corpus"), "--tokenizer", str(tokenizer), "--duration", "2", "--json", str(run_file)]) == 0
    out = capsys.readouterr().out
    assert "tokens/s from" in out and "packing efficiency" in out and "cores per million tokens/s" in out
    assert "part-000.jsonl:101 (tokenize): " in out and "not a JSON object" in out  # the 101st line, named
    assert "\ndiagnosis: " in out
    run = json.loads(run_file.read_text())
    assert run["tokens"] > 0 and run["bad_documents"][0]["key"].endswith("part-000.jsonl:101")

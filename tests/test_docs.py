"""Every example of the documentation runs as written: each Python snippet of README.md and of
every page in docs/, in a folder holding the data it names (``train/`` an ImageFolder of JPEGs,
``shards/`` the same as tar shards, ``train.bin`` tokens, ``corpus/`` JSON Lines text with its
``tokenizer.json``, ``speech/`` class folders of FLAC files
and ``videos/`` of H.264 MP4s, made with ffmpeg); each script in docs/examples/; and the
docstrings' ``>>>`` examples. A snippet preceded by ``<!-- readme-test: skip (why) -->`` is
skipped, with its reason shown. The site's home page is README.md with its links made relative."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stoker.bench import image_folder
from stoker.ingest import convert_storage
from stoker.storage import FileStorage
from stoker_testbed.data.media_files import encode_audio, encode_video, require_ffmpeg, tone_with_clicks, wav_bytes
from stoker_testbed.data.text import make_corpus

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*.py"))
_BLOCK = re.compile(r"(<!-- readme-test: skip \(([^)]*)\) -->\n)?```python\n(.*?)```", re.S)


def _snippets() -> list[tuple[str, str | None, str]]:
    """(the page and line, the skip reason or None, the code) for every Python block of every
    page but the home page, which is README.md again."""
    found = []
    for page in PAGES:
        if page.name == "index.md":
            continue
        text = page.read_text()
        for match in _BLOCK.finditer(text):
            code = match.group(3)
            if code.startswith("--8<--"):  # a file included whole: run as an example below
                continue
            line = text[: match.start(3)].count("\n") + 1
            found.append((f"{page.relative_to(ROOT)} line {line}", match.group(2), code))
    return found


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    images = image_folder(128, 160, 120, classes=2)
    (folder / "train").symlink_to(images, target_is_directory=True)
    with FileStorage(images) as source:
        convert_storage(source, folder / "shards", progress=False)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 3000, size=400)
    rng.integers(0, 50_000, size=int(lengths.sum()), dtype=np.uint16).tofile(folder / "train.bin")
    np.save(folder / "train.bin.offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    if importlib.util.find_spec("tokenizers") is not None:
        _, tokenizer = make_corpus(folder / "corpus", documents=200)
        shutil.copy(tokenizer, folder / "tokenizer.json")
    if shutil.which("ffmpeg"):
        wav = wav_bytes(tone_with_clicks(5.0, 16_000, 440.0, [1.0]), 16_000)
        for index in range(4):
            (folder / "speech" / f"speaker{index % 2}").mkdir(parents=True, exist_ok=True)
            encode_audio(wav, folder / "speech" / f"speaker{index % 2}", f"{index}.flac", ["-c:a", "flac"])
            (folder / "videos" / f"action{index % 2}").mkdir(parents=True, exist_ok=True)
            encode_video(folder / "videos" / f"action{index % 2}", f"{index}.mp4", 40, width=320, height=240)
    return folder


@pytest.mark.parametrize("name, skip, code", _snippets(), ids=[name for name, _, _ in _snippets()])
def test_the_snippet_runs(name: str, skip: str | None, code: str, workspace: Path) -> None:
    if skip:
        pytest.skip(skip)
    if "Transform(sample_rate" in code or "VideoTransform(" in code:
        require_ffmpeg()
    result = subprocess.run([sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{name} failed:\n{code}\n{result.stderr[-3000:]}"


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_the_example_script_runs(example: Path, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(example)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{example.name} failed:\n{result.stderr[-3000:]}"


def test_every_included_file_exists_and_every_page_is_in_the_site() -> None:
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = {next(iter(entry.values())) for entry in config["nav"]}
    pages = {page.name for page in PAGES if page.parent.name == "docs"}
    assert pages == listed, f"pages not in the site's nav: {sorted(pages - listed)}; nav entries without a page: {sorted(listed - pages)}"
    for page in PAGES:
        for included in re.findall(r'--8<-- "([^"]+)"', page.read_text()):
            assert (ROOT / included).is_file(), f"{page.name} includes {included}, which does not exist"


def test_the_home_page_is_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    home = readme.replace("](docs/", "](").replace("THIRD_PARTY_NOTICES.md", "THIRD_PARTY_NOTICES.md (in the repository)")
    assert (ROOT / "docs" / "index.md").read_text() == home, "docs/index.md is README.md with its links relative to docs/: copy it again"


def test_the_docstring_examples_run() -> None:
    import doctest
    import importlib

    modules = sorted(
        path.relative_to(ROOT / "python").with_suffix("").as_posix().replace("/", ".")
        for path in (ROOT / "python" / "stoker").rglob("*.py")
        if ">>>" in path.read_text()
    )
    assert modules, "no docstring examples found"
    for name in modules:
        result = doctest.testmod(importlib.import_module(name), verbose=False)
        assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed"

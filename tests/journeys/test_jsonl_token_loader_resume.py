"""A user's journey: a JSON Lines corpus written by pandas and by the json module, a BPE tokenizer
trained on it with the ``tokenizers`` package as its own quickstart does, the TokenLoader over
both with its defaults, the training script killed (SIGKILL) mid-epoch and started again from
its last checkpoint: the batches are the uninterrupted run's, token for token, and the resumed
run's stats count its own work (they said "0 documents, 0 tokens" after a resume)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.bench import corpus_documents
from stoker.ops import Tokenizer

tokenizers = pytest.importorskip("tokenizers")
pandas = pytest.importorskip("pandas")

EOS = "<|endoftext|>"
OPTIONS = {"context_length": 256, "batch_size": 4}  # everything else the TokenLoader's defaults

# The user's training script: a checkpoint every 5 steps, as a trainer saves one; started again
# after a crash, it resumes from the last checkpoint.
SCRIPT = textwrap.dedent(
    f"""
    import json, os, signal, sys
    from pathlib import Path

    import numpy as np
    import stoker
    from stoker.ops import Tokenizer

    corpus, tokenizer, out, crash_at = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    loader = stoker.TokenLoader(corpus, tokenizer=Tokenizer(tokenizer, eos={EOS!r}), **{OPTIONS!r})
    checkpoint, step = out / "checkpoint.json", 0
    if checkpoint.exists():
        saved = json.loads(checkpoint.read_text())
        loader.load_state_dict(saved["loader"])
        step = saved["step"]
    for batch in loader:
        np.savez(out / f"step-{{step}}.npz", input_ids=batch.input_ids, real_tokens=batch.real_tokens)  # what step trained on
        step += 1
        if step % 5 == 0:
            checkpoint.with_suffix(".part").write_text(json.dumps({{"loader": loader.state_dict(), "step": step}}))
            checkpoint.with_suffix(".part").replace(checkpoint)
        if step == crash_at:
            os.kill(os.getpid(), signal.SIGKILL)
    print(loader.stats())
    """
)


def test_a_jsonl_corpus_with_a_trained_bpe_tokenizer_resumes_exactly_after_a_kill(tmp_path: Path) -> None:
    texts = list(corpus_documents(300, seed=11, median_words=50))
    texts[7] = "Ünïcödé, emoji 🚀 and a URL https://example.org/a/b?c=d: kept as written"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    pandas.DataFrame({"text": texts[:150]}).to_json(corpus / "part-000.jsonl", orient="records", lines=True)  # escapes "/"
    with open(corpus / "part-001.jsonl", "w", encoding="utf-8") as file:
        for text in texts[150:]:
            file.write(json.dumps({"text": text}) + "\n")  # ensure_ascii: \u escapes

    # The tokenizers quickstart: BPE, whitespace pre-tokenizer, a trainer with the special tokens.
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    bpe.train_from_iterator(texts, tokenizers.trainers.BpeTrainer(special_tokens=["[UNK]", EOS], vocab_size=2000))
    bpe.save(str(tmp_path / "tokenizer.json"))

    reference = stoker.TokenLoader(corpus, tokenizer=Tokenizer(tmp_path / "tokenizer.json", eos=EOS), **OPTIONS)
    whole = [batch.input_ids for batch in reference]
    end_id = bpe.token_to_id(EOS)
    expected = sum(len(bpe.encode(text).ids) + 1 for text in texts)
    assert reference.stats().tokens == expected, "every document's tokens, and its end"
    assert sum(int((batch == end_id).sum()) for batch in whole) == len(texts)

    out = tmp_path / "run"
    out.mkdir()
    crash_at = len(whole) // 2 + 2  # two steps past a checkpoint: those two are trained on again
    command = [sys.executable, "-c", SCRIPT, str(corpus), str(tmp_path / "tokenizer.json"), str(out)]
    crashed = subprocess.run([*command, str(crash_at)], capture_output=True, text=True, timeout=600)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    saved_at = json.loads((out / "checkpoint.json").read_text())["step"]
    assert 0 < saved_at < crash_at < len(whole)
    before = [np.load(out / f"step-{step}.npz")["input_ids"] for step in range(saved_at)]

    resumed = subprocess.run([*command, "0"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    steps = sorted(int(path.stem.split("-")[1]) for path in out.glob("step-*.npz"))
    assert steps == list(range(len(whole))), "the resumed run ends where the uninterrupted one does"
    after = [np.load(out / f"step-{step}.npz") for step in range(saved_at, len(whole))]
    for step, (ours, theirs) in enumerate(zip(before + [batch["input_ids"] for batch in after], whole)):
        np.testing.assert_array_equal(ours, theirs, err_msg=f"step {step}")

    # The resumed run's stats: its own documents and the tokens of the batches it delivered.
    said = resumed.stdout.strip().splitlines()[-1]
    words = said.split()
    documents, tokens = int(words[0].replace(",", "")), int(words[3].replace(",", ""))
    assert words[1:3] == ["documents", "read,"] and words[4:6] == ["tokens", "delivered"], said
    assert 0 < documents <= len(texts), said
    assert tokens == sum(int(batch["real_tokens"]) for batch in after), said
    assert "0.0 MB/s" not in said and " 0 B/s" not in said, said

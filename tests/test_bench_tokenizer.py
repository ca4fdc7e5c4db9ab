"""The tokenizer benchmark (edgerun.bench.tokenizer) on a small corpus: the
corpus generator is deterministic and mixed, every family present in
../shared/data/tokenizers/hf gets a row, and edgerun's ids equal the
reference's on every document (as do tiktoken's for GPT-2). Speeds are
printed, not asserted: a shared CI machine makes timing claims flaky; the
10 MB run is `edgerun bench-tokenizer` (docs/TOKENIZER_BENCH.md)."""
import argparse
import json
import pathlib
import unicodedata

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

from edgerun.bench import tokenizer as bt  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
HF = REPO.parent / "shared" / "data" / "tokenizers" / "hf"


def test_corpus_is_deterministic_sized_and_mixed():
    a = bt.make_corpus(0.05, seed=7)
    assert a == bt.make_corpus(0.05, seed=7)
    assert a != bt.make_corpus(0.05, seed=8)
    sizes = [len(d.encode()) for d in a]
    assert sum(sizes) >= 50_000
    assert all(1024 <= s <= 4096 + 2048 for s in sizes), sizes   # a segment may overrun the target a little
    text = "".join(bt.make_corpus(0.5, seed=7))
    scripts = {"CJK": 0, "ARABIC": 0, "HEBREW": 0, "HIRAGANA": 0, "HANGUL": 0, "CYRILLIC": 0}
    for ch in set(text):
        name = unicodedata.name(ch, "")
        for s in scripts:
            if name.startswith(s):
                scripts[s] += 1
    assert all(scripts.values()), scripts
    assert "\u200d" in text and "\U0001F680" in text            # ZWJ sequences, plain emoji
    assert "\t\t" in text and "        " in text and "\r\n" in text and "\n\n\n" in text
    assert "def " in text and "0x" in text and "don't" in text


def test_families_parse():
    assert bt.parse_families(None) == list(bt.FAMILIES)
    assert bt.parse_families(["gpt2,qwen2", "llama2", "gpt2"]) == ["gpt2", "qwen3", "llama2"]
    with pytest.raises(ValueError, match="unknown tokenizer family"):
        bt.parse_families("bert")


@pytest.fixture(scope="module")
def report():
    if not HF.is_dir():
        pytest.skip(f"{HF} is absent")
    return bt.run(mb=0.05, repeat=1, data_dir=HF)


def test_every_family_is_exact(report):
    present = [f for f in bt.FAMILIES
               if (HF / f / ("tokenizer.model" if f == "llama2" else "tokenizer.json")).exists()]
    assert [r["family"] for r in report["results"]] == present
    table = bt.format_table(report)
    print(table)
    for r in report["results"]:
        assert r["exact"], (r["family"], r["exactness"])
        assert r["exactness"]["edgerun"]["mismatched_docs"] == 0
        e = r["engines"]
        assert e["edgerun"]["tokens"] == e[r["reference"]]["tokens"] > 1000
        assert e["edgerun"]["mb_per_s"] > 0 and e["edgerun_c"]["mb_per_s"] > 0
        assert f"\n{r['family']:<8} " in table
    gpt2 = {r["family"]: r for r in report["results"]}.get("gpt2")
    if gpt2 is not None and "tiktoken" in gpt2["engines"]:
        # tiktoken built offline from GPT-2's tokenizer.json must agree with HF to be timed at all
        assert gpt2["exactness"]["tiktoken"]["mismatched_docs"] == 0
        assert "edgerun_vs_tiktoken" in gpt2["ratios"]


def test_single_threaded(report):
    # per-document encode keeps every engine on the calling thread; a thread
    # pool (rayon) would add OS threads to the process
    for r in report["results"]:
        for name, e in r["engines"].items():
            if e["process_threads"] is not None:
                assert e["process_threads"] <= r["threads_before"], (r["family"], name, e)


def test_cli_verb_json(tmp_path, capsys):
    if not (HF / "gpt2" / "tokenizer.json").exists():
        pytest.skip("GPT-2 tokenizer.json is absent")
    from edgerun.cli import bench_tokenizer as verb
    p = argparse.ArgumentParser()
    verb.register(p.add_subparsers())
    out = tmp_path / "r.json"
    args = p.parse_args(["bench-tokenizer", "--mb", "0.02", "--families", "gpt2", "--repeat", "1", "--json",
                         "--data", str(HF), "--out", str(out), "-q"])
    assert args.func(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["results"][0]["family"] == "gpt2" and printed["results"][0]["exact"]
    assert json.loads(out.read_text())["corpus"] == printed["corpus"]


def test_cli_verb_no_data(tmp_path):
    from edgerun.cli import bench_tokenizer as verb
    p = argparse.ArgumentParser()
    verb.register(p.add_subparsers())
    args = p.parse_args(["bench-tokenizer", "--mb", "0.01", "--data", str(tmp_path), "-q"])
    with pytest.raises(ValueError, match="no tokenizer family found"):
        args.func(args)

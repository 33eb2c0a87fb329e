"""``mathsearch eval score-k | generation | analogies | class-split``: the seq2seq evaluations.

Plug-in of :mod:`mathsearch.cli.families` (one module, four sub-commands; :func:`run`
dispatches on
``args.eval_command``). No torch at import time. The metrics are in
:mod:`mathsearch.encoders.seq2seq_eval`.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import random
import textwrap
from pathlib import Path
from typing import Any

from mathsearch.cli.common import RAW_HELP, emit, fail
from mathsearch.core.paths import SHARED_DATA

logger = logging.getLogger(__name__)

__all__ = ["register", "run"]

_SHARED = SHARED_DATA
#: score_5 (%) on UNSEENEQCLASS test sets, seed Table 5 (p. 6): EQNET, best EXPEMB-E (H).
PUBLISHED: dict[str, tuple[float | None, float | None, int | None]] = {
    "simpleBoolean8": (97.4, 99.5, 1024),
    "simpleBoolean10": (99.1, 80.9, 256),
    "boolean5": (65.8, 57.1, 64),
    "boolean8": (58.1, 100.0, 1024),
    "boolean10": (71.4, 77.5, 1024),
    "largeSimpleBoolean5": (85.0, 79.7, 128),
    "largeBoolean5": (75.2, 70.4, 256),
    "simplepoly5": (65.6, 31.2, 1024),
    "simplepoly8": (98.9, 97.2, 256),
    "simplepoly10": (99.3, 100.0, 256),
    "oneVarPoly10": (81.3, 75.5, 1024),
    "oneVarPoly13": (90.4, 99.7, 512),
    "poly5": (55.3, 48.1, 128),
    "poly8": (86.2, 76.6, 512),
    "mediumBoolean7": (None, None, None),  # not in the seed's tables
}


def _model_args(parser: argparse.ArgumentParser, onnx: bool = True) -> None:
    parser.add_argument("--checkpoint", help="a `train seq2seq` checkpoint.pt")
    if onnx:
        parser.add_argument(
            "--onnx", help="an exported seq2seq model (default: the shipped seq2seq-v2.onnx)"
        )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--json", action="store_true")


def register(kinds: Any) -> None:
    """Add ``score-k``, ``generation``, ``analogies`` and ``class-split`` to ``eval``'s
    sub-parsers."""
    sk = kinds.add_parser(
        "score-k",
        help="seq2seq: score_k (seed eq. 1) on SemVec sets (per-set or joint models)",
        description="score_k = |N_k(q) ∩ c| / min(k, |c|) by cosine over each SemVec set "
        "(default: every shared validation set), for a checkpoint or an ONNX model, beside "
        "the published EQNET and ExpEmb test scores (seed Table 5); --baselines adds an "
        "untrained model of the same size and bag-of-tokens. Scores are percent with two "
        "decimals (the seed's tables print one), so a figure 0.05 below a published one is not "
        "printed as equal to it.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval score-k --onnx models/seq2seq-v1.onnx
              mathsearch eval score-k --checkpoint runs/s2s/checkpoint.pt --baselines --json
              mathsearch eval score-k --checkpoint runs/s2s/checkpoint.pt \\
                  ../shared/data/semvec/poly8-validationset.json.gz --k 5
              mathsearch eval score-k --checkpoint runs/poly5-128/checkpoint.pt \\
                  ../shared/data/semvec/poly5-validationset.json.gz --eqnet
                  (a per-set model on its own set, scored as the seed's Table 16)
            """),
        formatter_class=RAW_HELP,
    )
    sk.add_argument("sets", nargs="*", metavar="SET", help="SemVec .json.gz files")
    sk.add_argument("--k", type=int, default=5)
    sk.add_argument("--max-classes", type=int, help="classes drawn per set (default: all)")
    sk.add_argument("--baselines", action="store_true", help="untrained model + bag-of-tokens")
    sk.add_argument(
        "--eqnet",
        action="store_true",
        help="EQNET's denominator min(k, |c|) with |c| counting the query (the seed's tables)",
    )
    _model_args(sk)
    gen = kinds.add_parser(
        "generation",
        help="seq2seq: accuracy of generated equivalent expressions by beam size",
        description="Section 5.1 of the seed: beam search on held-out E-Gen expressions; a hit "
        "when any hypothesis is a valid tree that SymPy proves equivalent (EXPEMB-E; not the "
        "input itself) or equals the input (EXPEMB-A). simplify(a - b) == 0 under --timeout.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval generation --checkpoint runs/s2s/checkpoint.pt --limit 100
              mathsearch eval generation --checkpoint runs/s2s/checkpoint.pt \\
                  --beam-sizes 1,10,50 --limit 50 --json
            """),
        formatter_class=RAW_HELP,
    )
    gen.add_argument("--data", help="E-Gen file (default: the run's heldout-egen.txt)")
    gen.add_argument("--beam-sizes", default="1,10,50")
    gen.add_argument("--limit", type=int, default=100, help="source expressions (100)")
    gen.add_argument("--timeout", type=float, default=2.0, help="SymPy seconds per check")
    gen.add_argument("--max-len", type=int, default=64, help="tokens generated at most")
    _model_args(gen, onnx=False)
    an = kinds.add_parser(
        "analogies",
        help="seq2seq: embedding algebra x1 - y1 + y2 ~ x2 (seed Table 4)",
        description="emb(x1) - emb(y1) + emb(y2), nearest by cosine in a pool of E-Gen "
        "expressions plus the analogy expressions; top-1 / top-k accuracy over the seed's "
        "Table 4 analogies.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval analogies --checkpoint runs/s2s/checkpoint.pt
              mathsearch eval analogies --onnx models/seq2seq-v1.onnx --pool 20000 --json
            """),
        formatter_class=RAW_HELP,
    )
    an.add_argument("--pool", type=int, default=10_000, help="E-Gen expressions in the pool")
    an.add_argument("--top-k", type=int, default=5)
    _model_args(an)
    split = kinds.add_parser(
        "class-split",
        help="seq2seq: hold out a seeded share of each SemVec validation split's classes",
        description="Every class of a SemVec validation split also has members in its train "
        "split, so validation score_5 (the seed's Table 16) measures classes a model trained "
        "on. This writes OUT/unseen/<set>-validationset.json.gz (a seeded share of the "
        "classes) and OUT/seen/... (the rest): train with --semvec-exclude OUT/unseen/* and "
        "score on OUT/unseen/* to measure classes the model never saw.",
        epilog=textwrap.dedent("""\
            examples:
              mathsearch eval class-split --out splits
              mathsearch train seq2seq --out runs/s2s --hidden 128 --lr 1e-3 --max-len 64 \\
                  --semvec ../shared/data/semvec/*-trainset.json.gz --semvec-per-class 1000 \\
                  --semvec-exclude splits/unseen/*.json.gz --time-budget 2700
              mathsearch eval score-k --checkpoint runs/s2s/checkpoint.pt --eqnet \\
                  --baselines splits/unseen/*.json.gz
            """),
        formatter_class=RAW_HELP,
    )
    split.add_argument(
        "sets", nargs="*", metavar="SET", help="SemVec validation files (default: every shared one)"
    )
    split.add_argument("--out", required=True, help="folder for unseen/ and seen/")
    split.add_argument("--fraction", type=float, default=0.5, help="unseen share (0.5)")
    split.add_argument("--seed", type=int, default=0, help="shuffle seed (0)")
    split.add_argument("--json", action="store_true")


def _default_onnx() -> str:
    from mathsearch.runtime.embedders import default_model_path

    return str(default_model_path("seq2seq"))


def _embedders(args: argparse.Namespace, baselines: bool = False) -> dict[str, Any]:
    from mathsearch.encoders.seq2seq_eval import bag_of_tokens, checkpoint_embedder, onnx_embedder

    out: dict[str, Any] = {}
    if args.checkpoint:
        from mathsearch.encoders.seq2seq import ExpEmb
        from mathsearch.encoders.seq2seq_training import load_expemb
        from mathsearch.encoders.torch_setup import seed, set_threads

        set_threads(args.threads)
        model, vocab, _ = load_expemb(args.checkpoint)
        out["model"] = checkpoint_embedder(model, vocab)
        if baselines:
            seed(0)
            out["untrained"] = checkpoint_embedder(ExpEmb(model.config).eval(), vocab)
            out["bag-of-tokens"] = bag_of_tokens(vocab.tokens)
    else:
        from mathsearch.runtime.seq2seq_runtime import Seq2SeqEmbedder

        embedder = Seq2SeqEmbedder(getattr(args, "onnx", None) or _default_onnx(), threads=1)
        out["model"] = onnx_embedder(embedder)
        if baselines:
            out["bag-of-tokens"] = bag_of_tokens(list(embedder.index))
    return out


def _score_k(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    from mathsearch.encoders.seq2seq_eval import semvec_score_k
    from mathsearch.indexer.semvec import set_name
    from mathsearch.indexer.semvec_prefix import read_semvec_prefix

    sets = list(args.sets) or sorted(glob.glob(str(_SHARED / "semvec" / "*-validationset.json.gz")))
    if not sets:
        raise ValueError("no SemVec sets given and none in ../shared/data/semvec")
    embedders = _embedders(args, args.baselines)
    rows = []
    for path in tqdm(sets, desc="score-k", disable=True if args.no_progress else None):
        classes = read_semvec_prefix(path)
        name = set_name(path)
        eqnet, expemb, hidden = PUBLISHED.get(name, (None, None, None))
        row: dict[str, Any] = {"set": name, "eqnet_test": eqnet, "expemb_e_test": expemb}
        row["expemb_e_hidden"] = hidden
        for label, embed in embedders.items():
            result = semvec_score_k(embed, classes, args.k, args.max_classes, eqnet=args.eqnet)
            row[label] = round(100 * result["score"], 2)
            row["queries"], row["classes"] = result["queries"], result["classes"]
        rows.append(row)
    mean = {label: round(sum(r[label] for r in rows) / len(rows), 2) for label in embedders}
    return {"k": args.k, "split": "validation", "eqnet": args.eqnet, "sets": rows, "mean": mean}


def _generation(args: argparse.Namespace) -> dict[str, Any]:
    from tqdm import tqdm

    from mathsearch.encoders.seq2seq_data import read_egen
    from mathsearch.encoders.seq2seq_eval import generation_accuracy
    from mathsearch.encoders.seq2seq_training import load_expemb
    from mathsearch.encoders.torch_setup import set_threads

    if not args.checkpoint:
        raise ValueError("eval generation needs --checkpoint (the decoder is not exported)")
    set_threads(args.threads)
    model, vocab, _ = load_expemb(args.checkpoint)
    data = args.data or str(Path(args.checkpoint).parent / "heldout-egen.txt")
    if not Path(data).is_file():
        raise ValueError(f"no held-out data {data}: give --data")
    sizes = [int(x) for x in args.beam_sizes.split(",") if x.strip()]
    if not sizes or min(sizes) < 1 or args.limit < 1:
        raise ValueError("--beam-sizes and --limit must be positive")
    sources = [c[0] for c in read_egen([data], model.config.max_len)]
    random.Random(0).shuffle(sources)
    sources = sources[: args.limit]
    bar = tqdm(total=len(sources) * len(sizes), desc="generation", disable=args.no_progress or None)
    try:
        result = generation_accuracy(
            model, vocab, sources, sizes, mode=model.config.mode, timeout=args.timeout,
            max_len=args.max_len, progress=bar.update,
        )  # fmt: skip
    finally:
        bar.close()
    return {**result, "data": Path(data).name}


def _analogies(args: argparse.Namespace) -> dict[str, Any]:
    from mathsearch.cli.train_seq2seq import default_egen
    from mathsearch.encoders.seq2seq_data import read_egen
    from mathsearch.encoders.seq2seq_eval import analogies

    clusters = read_egen(default_egen(), 64)
    pool = [s for c in clusters for s in c]
    random.Random(0).shuffle(pool)
    embed = _embedders(args)["model"]
    return analogies(embed, pool[: args.pool], top_k=args.top_k)


def _class_split(args: argparse.Namespace) -> dict[str, Any]:
    from mathsearch.indexer.semvec import read_semvec_raw, set_name
    from mathsearch.indexer.semvec_class_split import write_class_split

    sets = list(args.sets) or sorted(glob.glob(str(_SHARED / "semvec" / "*-validationset.json.gz")))
    if not sets:
        raise ValueError("no SemVec sets given and none in ../shared/data/semvec")
    written = write_class_split(sets, args.out, args.fraction, args.seed)
    rows = [
        {
            "set": set_name(path),
            "unseen": len(read_semvec_raw(unseen)),
            "seen": len(read_semvec_raw(seen)),
            "files": [str(unseen), str(seen)],
        }
        for path, unseen, seen in zip(sets, written[::2], written[1::2], strict=True)
    ]
    return {"out": args.out, "fraction": args.fraction, "seed": args.seed, "sets": rows}


def _print(command: str, report: dict[str, Any]) -> None:
    if command == "class-split":
        emit(f"classes held out (fraction {report['fraction']}, seed {report['seed']}):")
        for row in report["sets"]:
            emit(f"  {row['set']:<22} unseen {row['unseen']:>5}  seen {row['seen']:>5}")
        emit(f"train with --semvec-exclude {report['out']}/unseen/*.json.gz; "
             f"score on {report['out']}/unseen/*.json.gz")  # fmt: skip
    elif command == "score-k":
        labels = list(report["mean"])
        denominator = "EQNET's denominator" if report.get("eqnet") else "min(k, |c| - 1)"
        emit(
            f"score_{report['k']} (%) on SemVec {report['split']} sets ({denominator}; their "
            "classes are unseen only by a model trained with --semvec-exclude on them)"
        )
        emit(
            f"{'set':<22}{'EQNET(test)':>12}{'ExpEmb-E(test)':>15}"
            + "".join(f"{label:>15}" for label in labels)
        )
        for row in report["sets"]:
            published = "" if row["expemb_e_test"] is None else f"{row['expemb_e_test']}"
            emit(
                f"{row['set']:<22}{row['eqnet_test'] or '':>12}{published:>15}"
                + "".join(f"{row[label]:>15}" for label in labels)
            )
        emit(f"{'mean':<22}{'':>12}{'':>15}" + "".join(f"{v:>15}" for v in report["mean"].values()))
    elif command == "generation":
        emit(f"generation accuracy ({report['mode']}, {report['sources']} held-out sources)")
        for size, row in report["beams"].items():
            invalid = f"{row['invalid_hypotheses']}/{row['hypotheses']}"
            emit(f"  beam {size:>3}: {row['accuracy']:.4f}  ({row['correct']} correct, "
                 f"{invalid} hypotheses invalid)")  # fmt: skip
    else:
        top = next(k for k in report if k.startswith("top") and k != "top1_accuracy")
        emit(f"analogies over a pool of {report['pool']}: top-1 {report['top1_accuracy']:.2f}, "
             f"{top.replace('_accuracy', '')} {report[top]:.2f}")  # fmt: skip
        for row in report["analogies"]:
            mark = "ok" if row["top1"] else "--"
            emit(f"  {mark} ({row['x1']}) - ({row['y1']}) + ({row['y2']}) ~ {row['expected']}: "
                 f"nearest {row['nearest'][0]!r}")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Handler of ``eval score-k | generation | analogies | class-split``."""
    if args.eval_command != "class-split":  # class-split only reads and writes JSON
        try:
            from mathsearch.encoders.torch_setup import ensure_torch

            ensure_torch()
        except ImportError as exc:
            if args.eval_command != "score-k" or getattr(args, "checkpoint", None):
                return fail(f"this command needs the train extra (torch): {exc}")
    from mathsearch.export.errors import ModelCardError, ModelMismatchError
    from mathsearch.indexer.errors import IndexerError

    errors: tuple[type[Exception], ...] = (ModelCardError, ModelMismatchError, IndexerError)
    runners = {
        "score-k": _score_k,
        "generation": _generation,
        "analogies": _analogies,
        "class-split": _class_split,
    }
    caught: tuple[type[Exception], ...] = (*errors, ValueError, OSError)
    try:
        if getattr(args, "checkpoint", None) and not Path(args.checkpoint).is_file():
            raise ValueError(f"checkpoint {args.checkpoint} does not exist")
        report = runners[args.eval_command](args)
    except caught as exc:
        return fail(str(exc))
    if args.json:
        emit(json.dumps(report, indent=2))
    else:
        _print(args.eval_command, report)
    return 0

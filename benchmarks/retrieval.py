"""How often the history search finds the evidence: Parley's ranking against Okapi BM25.

    python -m benchmarks.retrieval [--show-misses]

Long multi-session conversations between a user and Parley (`benchmarks/data/`),
with facts planted across sessions days apart and questions asked in other words than
the facts were said, about who said what and about when. Each question names the
messages that hold its evidence. The figure is the share of that evidence among the
two messages the search returns (what `conversation_history` shows), per kind of
question, beside BM25 (rank_bm25's BM25Okapi over the messages) measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from memory.history import Message
from memory.search import HistorySearch

DATA = Path(__file__).parent / "data"
TOP = 2


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[int]
    kind: str


@dataclass(frozen=True)
class Dialogue:
    name: str
    messages: tuple[Message, ...]
    questions: tuple[Question, ...]

    @property
    def now(self) -> datetime:
        """When the questions are asked: a little after the last message."""
        last = self.messages[-1].at
        assert last is not None
        return last + timedelta(minutes=5)


def load_dialogues(folder: Path = DATA) -> list[Dialogue]:
    dialogues = []
    for path in sorted(folder.glob("recall_dialogues_*.json")):
        for item in json.loads(path.read_text(encoding="utf-8"))["conversations"]:
            messages = tuple(Message(m["seq"], m["role"], m["content"],
                                     at=datetime.fromisoformat(m["at"]))
                             for m in item["messages"])
            questions = tuple(Question(q["question"], frozenset(q["evidence"]), q["kind"])
                              for q in item["questions"])
            dialogues.append(Dialogue(f"{path.stem[-1]}/{item['name']}", messages, questions))
    return dialogues


Ranker = Callable[[Dialogue, str], list[int]]


def parley_ranker(dialogue: Dialogue, query: str) -> list[int]:
    search = HistorySearch(dialogue.messages, now=dialogue.now)
    return [places[0].seq for places in search.places(query)]


_TOKEN = re.compile(r"\w+")


def bm25_ranker() -> Ranker:
    """BM25Okapi over whole messages, words lowercased, as the usual baseline is run."""
    from rank_bm25 import BM25Okapi

    indexes: dict[str, BM25Okapi] = {}

    def rank(dialogue: Dialogue, query: str) -> list[int]:
        index = indexes.get(dialogue.name)
        if index is None:
            index = indexes[dialogue.name] = BM25Okapi(
                [_TOKEN.findall(m.content.lower()) for m in dialogue.messages])
        scores = index.get_scores(_TOKEN.findall(query.lower()))
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return [dialogue.messages[i].seq for i in order[:TOP]]

    return rank


def recall(found: Sequence[int], evidence: frozenset[int]) -> float:
    return len(evidence & set(found[:TOP])) / len(evidence)


def evaluate(dialogues: Sequence[Dialogue], rankers: dict[str, Ranker],
             show_misses: bool = False) -> dict[str, dict[str, float]]:
    """Mean recall of the evidence in the top two, per ranker and kind of question."""
    results: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in rankers}
    for dialogue in dialogues:
        for question in dialogue.questions:
            for name, rank in rankers.items():
                found = rank(dialogue, question.text)
                score = recall(found, question.evidence)
                results[name][question.kind].append(score)
                results[name]["all"].append(score)
                if show_misses and name == "Parley" and score < 1:
                    print(f"  miss {dialogue.name} {question.kind}: {question.text} "
                          f"evidence {sorted(question.evidence)}, found {found[:TOP]}")
    return {name: {kind: statistics.mean(scores) for kind, scores in kinds.items()}
            for name, kinds in results.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show-misses", action="store_true",
                        help="list the questions whose evidence Parley's top two miss")
    args = parser.parse_args(argv)
    dialogues = load_dialogues()
    count = sum(len(d.questions) for d in dialogues)
    chars = sum(len(m.content) for d in dialogues for m in d.messages)
    print(f"Evidence in the top {TOP} ({len(dialogues)} conversations, "
          f"{sum(len(d.messages) for d in dialogues)} messages, {chars:,} characters, "
          f"{count} questions)")
    started = time.perf_counter()
    figures = evaluate(dialogues, {"Parley": parley_ranker, "BM25": bm25_ranker()},
                       args.show_misses)
    kinds = sorted(figures["Parley"], key=lambda k: (k == "all", k))
    print(f"  {'kind':<12}{'Parley':>8}{'BM25':>8}")
    for kind in kinds:
        print(f"  {kind:<12}{figures['Parley'][kind]:>8.1%}{figures['BM25'][kind]:>8.1%}")
    print(f"  ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()

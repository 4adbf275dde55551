"""The honest corpus on the learner's path, chapters 4 on (chapters 0-3 and the grader's path: test_honest_corpus.py)."""

from __future__ import annotations

import pytest

from synclab.lab.chapters import CHAPTERS
from tests.test_honest_corpus import (EARLY, RIGHT, WRONG, _ids, fails_its_check_on_the_learners_path, of_chapters,
                                      passes_the_learners_check, unclaused)

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

LATE = tuple(c for c in CHAPTERS if c not in EARLY)  # and any chapter added after them


def test_the_two_files_share_every_chapter():
    assert set(EARLY) | set(LATE) == set(CHAPTERS) and not set(EARLY) & set(LATE)


@pytest.mark.parametrize("answer", of_chapters(RIGHT, LATE), ids=_ids(of_chapters(RIGHT, LATE)))
def test_a_right_answer_passes_the_learners_check(answer):
    passes_the_learners_check(answer)


@pytest.mark.parametrize("answer", unclaused(of_chapters(WRONG, LATE)),
                         ids=_ids(unclaused(of_chapters(WRONG, LATE))))
def test_an_honest_mistake_fails_its_check_on_the_learners_path(answer):
    fails_its_check_on_the_learners_path(answer)

# Built from ch2.BUG_LABELS itself (a runner per label, in a module-level mapping), collections.OrderedDict, reversed().
from collections import OrderedDict

RUNNER_OF_LABEL = {"early read": "C", "pageable": "B", "unordered": "A", "freed early": "D", "over-wait": "E"}


def my_diagnosis() -> dict[str, str]:
    """Your label (a key of ch2.BUG_LABELS) for each runner, A to E."""
    answer = OrderedDict()
    for label in reversed(list(ch2.BUG_LABELS)):
        answer[RUNNER_OF_LABEL[label]] = label
    return dict(sorted(answer.items(), key=lambda item: item[0]))

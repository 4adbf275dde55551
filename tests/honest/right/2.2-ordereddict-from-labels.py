# Built from ch2.BUG_LABELS itself (the runners of each label, in a module-level mapping), collections.OrderedDict,
# reversed().
from collections import OrderedDict

RUNNERS_OF_LABEL = {"early read": "CF", "pageable": "B", "unordered": "A", "freed early": "D", "over-wait": "E"}


def my_diagnosis() -> dict[str, str]:
    """Your label (a key of ch2.BUG_LABELS) for each runner, A to F."""
    answer = OrderedDict()
    for label in reversed(list(ch2.BUG_LABELS)):
        for runner in RUNNERS_OF_LABEL[label]:
            answer[runner] = label
    return dict(sorted(answer.items(), key=lambda item: item[0]))

"""``{hints} N.M``: an exercise's ladder on its page: two hints, then the answer in the directive's body.

The hints are the lab's own (``synclab/lab/hints.py``), so a page and its lab cannot disagree. The
body, vLLM's code at the PR its ``Source:`` line names, is the ladder's last rung. Each rung is
a fold the reader opens in turn; the directive sits after the exercise's contract, so no answer
comes before its exercise in the reading path. Usage::

    `````{hints} 3.1
    Source: ...

    ```python
    ...
    ```
    `````
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def ladder_markdown(task: str, answer: str) -> str:
    """The ladder as MyST: one dropdown per hint, then the answer's dropdown (when there is a body)."""
    from synclab.lab.hints import ladder

    fence = "`" * 6  # longer than any fence a body holds
    parts = []
    for number, hint in enumerate(ladder(task), 1):
        parts.append(f"{fence}{{dropdown}} Exercise {task}, hint {number}: {hint.title}\n{hint.text}\n{fence}")
    if answer.strip():
        parts.append(f"{fence}{{dropdown}} Exercise {task}, the answer in vLLM's code, from the PR's source ("
                     f"open it once your check passes)\n{answer}\n{fence}")
    return "\n\n".join(parts) + "\n"


class HintsDirective(SphinxDirective):
    required_arguments = 1  # the task id, "3.1"
    has_content = True

    def run(self) -> list[nodes.Node]:
        task = self.arguments[0]
        try:
            text = ladder_markdown(task, "\n".join(self.content))
        except KeyError as exc:
            return [self.state.document.reporter.warning(str(exc), line=self.lineno)]
        return self.parse_text_to_nodes(text)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("hints", HintsDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

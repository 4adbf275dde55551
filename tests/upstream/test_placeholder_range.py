"""``PlaceholderRange``'s embedding queries, translated from vLLM's tests.

Sources:

* ``tests/multimodal/test_inputs.py`` — ``test_placeholder_range_get_num_embeds`` and
  ``test_placeholder_range_embeds_cumsum``, as they stand after vLLM PR #40143 (the cumsum
  is a ``list[int]``). Before #40143 the same cases expected tensors (compared with
  ``torch.equal``); that older form is kept below for the lab's pre-#40143 baseline.
* ``tests/multimodal/test_utils.py`` — the ``PlaceholderRange`` part:
  ``test_placeholder_range_get_embeds_indices_in_range``, cases as at #40143 (unchanged since).

Classes under test: Exercise 5.1's ``ListCachedRange`` (the lab's #40143 range), the lab's
``_PlaceholderRangeReference`` (plain loops; it has no ``embeds_cumsum``) and
``PlaceholderRangeBaseline`` (before #40143: a tensor cumsum).

Not translated: ``test_placeholder_range_extract_embeds_range``. The lab's ``PlaceholderRange``
implements only the queries its scheduler asks (``get_num_embeds``,
``get_embeds_indices_in_range``); it has no ``extract_embeds_range``, which #40143 left
unchanged (torch-based) in vLLM.
"""

from __future__ import annotations

import pytest
import torch

from synclab.engine.mm_inputs import PlaceholderRange, PlaceholderRangeBaseline
from synclab.list_caches.checks import _PlaceholderRangeReference
from tests.upstream.adapters import list_cached_range

pytestmark = pytest.mark.sim  # the simulated device, on every machine (conftest.py)

ListCachedRange = list_cached_range()
QUERY_CLASSES = [ListCachedRange, _PlaceholderRangeReference, PlaceholderRangeBaseline]


def _range(cls: type[PlaceholderRange], is_embed: torch.Tensor | None, offset: int = 0) -> PlaceholderRange:
    """vLLM's tests: the length is the mask's, or 5 without a mask."""
    return cls(offset=offset, length=5 if is_embed is None else len(is_embed), is_embed=is_embed)


T, F = True, False


@pytest.mark.parametrize("cls", QUERY_CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("is_embed,expected", [
    (None, 5),
    (torch.tensor([T, T, T, T, T]), 5),
    (torch.tensor([F, F, F, F, F]), 0),
    (torch.tensor([T, F, T, F, T]), 3),
    (torch.tensor([T]), 1),
])
def test_placeholder_range_get_num_embeds(cls: type[PlaceholderRange], is_embed: torch.Tensor | None,
                                          expected: int) -> None:
    """test_inputs.py::test_placeholder_range_get_num_embeds: the mask's True count, or the length."""
    got = _range(cls, is_embed).get_num_embeds()
    assert got == expected
    assert type(got) is int


@pytest.mark.parametrize("is_embed,expected", [
    (None, None),
    (torch.tensor([F, T, F, T, T]), [0, 1, 1, 2, 3]),
    (torch.tensor([T, T, T]), [1, 2, 3]),
])
def test_placeholder_range_embeds_cumsum(is_embed: torch.Tensor | None, expected: list[int] | None) -> None:
    """test_inputs.py::test_placeholder_range_embeds_cumsum (after #40143): a cached list of int."""
    pr = _range(ListCachedRange, is_embed)
    if expected is None:
        assert pr.embeds_cumsum is None
        return
    assert pr.embeds_cumsum == expected
    assert all(type(x) is int for x in pr.embeds_cumsum)  # #40143: no 0-d tensors inside
    assert pr.embeds_cumsum is pr.embeds_cumsum  # computed once (cached_property)


@pytest.mark.parametrize("is_embed,expected", [
    (torch.tensor([F, T, F, T, T]), torch.tensor([0, 1, 1, 2, 3])),
    (torch.tensor([T, T, T]), torch.tensor([1, 2, 3])),
])
def test_placeholder_range_embeds_cumsum_before_40143(is_embed: torch.Tensor, expected: torch.Tensor) -> None:
    """test_inputs.py::test_placeholder_range_embeds_cumsum as it was before #40143, on the lab's baseline.

    The baseline is the lab's pre-#40143 code on purpose (chapter 5 measures it): the cumsum is a tensor.
    """
    pr = _range(PlaceholderRangeBaseline, is_embed)
    assert isinstance(pr.embeds_cumsum, torch.Tensor)
    assert torch.equal(pr.embeds_cumsum, expected)
    assert pr.embeds_cumsum is pr.embeds_cumsum


@pytest.mark.parametrize("cls", QUERY_CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("is_embed,start_idx,end_idx,expected", [
    (None, 2, 4, (2, 4)),
    (torch.tensor([F, T, F, T, T]), 3, 5, (1, 3)),
    (torch.tensor([F, T, F, T, T]), 0, 2, (0, 1)),
    (torch.tensor([T, F, T, F]), 2, 2, (1, 1)),
])
def test_placeholder_range_get_embeds_indices_in_range(cls: type[PlaceholderRange], is_embed: torch.Tensor | None,
                                                       start_idx: int, end_idx: int,
                                                       expected: tuple[int, int]) -> None:
    """test_utils.py::test_placeholder_range_get_embeds_indices_in_range: rows of the encoder output in a window."""
    got = _range(cls, is_embed).get_embeds_indices_in_range(start_idx, end_idx)
    assert got == expected
    assert all(type(x) is int for x in got)


@pytest.mark.parametrize("cls", [ListCachedRange, _PlaceholderRangeReference], ids=lambda c: c.__name__)
def test_guards_added_by_40143(cls: type[PlaceholderRange]) -> None:
    """Not an upstream test case: the two guards #40143's review added (vLLM has no case for them).

    An empty mask has no ``[-1]`` (``get_num_embeds`` is 0), and ``end_idx == 0`` is an empty
    window, not ``cumsum[-1]`` (the total). The baseline keeps both bugs on purpose (chapter 5).
    """
    assert cls(offset=0, length=0, is_embed=torch.tensor([], dtype=torch.bool)).get_num_embeds() == 0
    assert cls(offset=0, length=5, is_embed=torch.tensor([F, T, F, T, T])).get_embeds_indices_in_range(0, 0) == (0, 0)

# A module-level guard function, an alias for the size list, and the invariant asserted as a ValueError.
import math

sizes_of = lambda cursor: cursor.num_scheduled_tokens_cpu.tolist()


def rows_must_match(rows: int, sizes: list[int]) -> None:
    if rows != math.fsum(sizes):
        raise ValueError(f"{rows} rows for sizes {sizes[:8]}{'...' if len(sizes) > 8 else ''} "
                         f"(sum {sum(sizes)}): pass exactly this sub-group's rows")


class AllPoolNoSync(AllPool):
    """ALL pooling as later vLLM has it: the caller slices the sub-group, the pooler splits by host sizes."""

    receives_group_rows = True  # the dispatcher hands this pooler exactly its sub-group's rows

    def split_hidden_states(self, hidden_states: torch.Tensor, cursor: PoolingCursor) -> list[torch.Tensor]:
        """``hidden_states`` holds exactly this sub-group's rows; one view per request, 0 syncs."""
        sizes = sizes_of(cursor)
        rows_must_match(len(hidden_states), sizes)
        return [*torch.split(hidden_states, sizes)]

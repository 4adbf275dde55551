# Reads the sum back as a Python number, then sends it up again: the value is right, the two syncs are not.
# fails: no-sync
def sum_on_device(values: torch.Tensor) -> torch.Tensor:
    return torch.tensor(values.sum().item(), device=values.device)

# A reduction kept on the device, written with torch.sum and a guard that needs no read (numel is host metadata).
def sum_on_device(values: torch.Tensor) -> torch.Tensor:
    return torch.sum(values, dim=0) if values.numel() else values.new_zeros(())

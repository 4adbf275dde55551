# Sends a tensor that is pinned and contiguous already straight up, as the contract allows, but forgets the dtype the
# caller asked for on that path: an int32 tensor asked for as int64 arrives as int32.
# fails: values
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, torch.Tensor) and data.is_pinned() and data.is_contiguous():
        return data.to(device, non_blocking=True)  # pinned already: straight up
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        host = data.contiguous().pin_memory() if pin else data
    else:
        host = torch.tensor(data, dtype=dtype, pin_memory=pin)
    return host.to(device=device, dtype=dtype, non_blocking=True)

# Uploads a tensor that is pinned already as it is, and pins a contiguous copy of any other: a pinned slice of a wider
# tensor's columns has gaps still, and torch uploads a view with gaps through a pageable temporary, a staging copy.
# fails: no-syncs
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        host = data if data.is_pinned() or not pin else data.contiguous().pin_memory()
    else:
        host = torch.tensor(data, dtype=dtype, pin_memory=pin)
    return host.to(device=device, dtype=dtype, non_blocking=True)

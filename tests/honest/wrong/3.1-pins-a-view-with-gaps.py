# Pins a CPU tensor as it comes, as vLLM's helper does: a slice of a wider tensor's columns keeps its gaps when pinned,
# and torch uploads a view with gaps through a pageable temporary of its own, a staging copy after all.
# fails: no-syncs
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        host = data.pin_memory() if pin else data
    else:
        host = torch.tensor(data, dtype=dtype, pin_memory=pin)
    return host.to(device=device, dtype=dtype, non_blocking=True)

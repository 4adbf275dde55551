# the device normalised with torch.device(...) first, as vLLM code often does (DeviceLike is a str or a torch.device)
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    target = torch.device(device)
    pin = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        host = data.contiguous().pin_memory() if pin else data
    else:
        host = torch.tensor(data, dtype=dtype, pin_memory=pin)
    return host.to(target, dtype=dtype, non_blocking=True)

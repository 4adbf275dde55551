# vLLM's own style: the platform's answer read once, as the module constant PIN_MEMORY = is_pin_memory_available()
PIN_MEMORY = is_pin_memory_available()


def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        host = data.pin_memory() if PIN_MEMORY else data
    else:
        host = torch.tensor(data, dtype=dtype, pin_memory=PIN_MEMORY)
    return host.to(device=device, dtype=dtype, non_blocking=True)

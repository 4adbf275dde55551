# builds a list with a dtype of its own choosing when the caller gives none (float32): torch.tensor's default for a
# list of ints is int64
# fails: values
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        host = data.pin_memory() if pin else data
    else:
        host = torch.tensor(data, dtype=dtype or torch.float32, pin_memory=pin)
    return host.to(device=device, dtype=dtype, non_blocking=True)

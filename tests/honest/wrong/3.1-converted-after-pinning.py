# Pins the data, then converts it to the dtype asked for on the host: the conversion makes a new, pageable tensor,
# and that is the one uploaded.
# fails: no-syncs
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, torch.Tensor):
        host = data.pin_memory() if pin else data.clone()
    else:
        host = torch.tensor(np.asarray(data).tolist() if isinstance(data, np.ndarray) else data, pin_memory=pin)
        if isinstance(data, np.ndarray):
            host = host.to(torch.from_numpy(data[:0]).dtype)
    if dtype is not None:
        host = host.to(dtype)
    return host.to(device, non_blocking=True)

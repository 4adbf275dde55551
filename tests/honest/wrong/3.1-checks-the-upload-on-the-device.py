# Right upload, then a sanity check of the values it sent: bool() of a device comparison reads the result back,
# a sync every call.
# fails: no-syncs
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        host = data.contiguous().pin_memory() if pin else data
    else:
        host = torch.tensor(data, dtype=dtype, pin_memory=pin)
    out = host.to(device=device, dtype=dtype, non_blocking=True)
    assert bool((out.to(host.dtype if dtype is None else dtype) == out).all()), "the upload changed the values"
    return out

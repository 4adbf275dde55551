# Builds the host tensor without the caller's dtype and converts in the upload: a float list asked for as float64
# goes through float32 first, and loses what float32 cannot hold.
# fails: values
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        host = data.contiguous().pin_memory() if pin else data
    else:
        host = torch.tensor(data, pin_memory=pin)  # the dtype is applied by the upload below
    return host.to(device=device, dtype=dtype, non_blocking=True)

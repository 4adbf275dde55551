# pins a tensor without gaps as it lies (a transposed one stays transposed: torch uploads it in one copy), and makes
# a contiguous copy only of a view with gaps; a pinned tensor without gaps goes up as it is
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if not isinstance(data, torch.Tensor):
        return torch.tensor(data, dtype=dtype, pin_memory=pin).to(device, non_blocking=True)
    if not pin:
        return data.to(device, dtype=dtype, non_blocking=True)
    no_gaps = data.is_contiguous() or (data.dim() == 2 and data.t().is_contiguous())  # as it is, or transposed
    host = data.pin_memory() if no_gaps else data.contiguous().pin_memory()
    if dtype not in (None, host.dtype) and not host.is_contiguous():
        host = host.contiguous().pin_memory()  # a transposed source converted on the way would stage
    return host.to(device, dtype=dtype, non_blocking=True)

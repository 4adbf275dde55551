# structural pattern matching on the input's type; torch.as_tensor, then empty_like(pin_memory=...).copy_()
def _host_tensor(data, dtype):
    """A CPU tensor with the values of torch.tensor(data, dtype=dtype); it may share memory with ``data``."""
    match data:
        case torch.Tensor():
            return data if dtype is None else data.to(dtype)
        case np.ndarray():
            return torch.as_tensor(data, dtype=dtype)
        case _:
            return torch.tensor(data, dtype=dtype)


def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    host = _host_tensor(data, dtype)
    if is_pin_memory_available() and not (host.is_pinned() and host.is_contiguous()):
        pinned = torch.empty_like(host, pin_memory=True, memory_format=torch.contiguous_format)  # uploads in one piece
        pinned.copy_(host)  # a host copy: whatever `host` shares with the caller is free again now
        host = pinned
    return host.to(device, non_blocking=True)

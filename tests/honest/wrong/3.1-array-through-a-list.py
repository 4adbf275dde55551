# Every input turned into a list first, so that one torch.tensor call pins it: a NumPy int32 array, with dtype None,
# comes back int64.
# fails: values
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    values = data.tolist() if isinstance(data, (np.ndarray, torch.Tensor)) else data
    host = torch.tensor(values, dtype=dtype, pin_memory=is_pin_memory_available())
    return host.to(device, non_blocking=True)

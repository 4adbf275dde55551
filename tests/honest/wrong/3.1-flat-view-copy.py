# A pinned buffer of the data's shape, filled through flat views: .view(-1) cannot flatten a transposed tensor
# fails: values
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    src = data if isinstance(data, torch.Tensor) else torch.as_tensor(data) if isinstance(data, np.ndarray) \
        else torch.tensor(data, dtype=dtype)
    host = torch.empty(src.shape, dtype=dtype or src.dtype, pin_memory=is_pin_memory_available())
    host.view(-1).copy_(src.view(-1))  # one flat copy into the pinned buffer
    return host.to(device, non_blocking=True)

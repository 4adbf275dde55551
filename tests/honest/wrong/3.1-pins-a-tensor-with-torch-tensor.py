# Every input through one torch.tensor(..., pin_memory=pin) call, a tensor made contiguous first: torch refuses to pin
# a tensor it is handed ("Can't pin tensor constructed from a variable"), before it asks any allocator.
# fails: values
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        if not pin:
            return data.to(device, dtype=dtype, non_blocking=True)
        data = data.detach().contiguous()
    return torch.tensor(data, dtype=dtype, pin_memory=pin).to(device, non_blocking=True)

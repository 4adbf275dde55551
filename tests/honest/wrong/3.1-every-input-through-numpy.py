# Turns every input into a NumPy array first (a tensor by .numpy()), then pins a copy of it: NumPy has no bfloat16,
# so a bfloat16 CPU tensor raises.
# fails: values
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pin = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        array = np.ascontiguousarray(data.numpy())  # a copy of its own, C order
        host = torch.from_numpy(array.copy())
    else:
        host = torch.tensor(data, dtype=dtype)
    host = host.pin_memory() if pin else host
    return host.to(device=device, dtype=dtype, non_blocking=True)

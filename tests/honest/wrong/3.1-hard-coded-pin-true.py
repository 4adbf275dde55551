# pin_memory=True hard-coded, as the PR's first revision had it in the sampler
# fails: wsl
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        return data.contiguous().pin_memory().to(device, dtype=dtype, non_blocking=True)
    return torch.tensor(data, dtype=dtype, pin_memory=True).to(device, non_blocking=True)

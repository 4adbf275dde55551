# a plain non_blocking .to(device) of a freshly built tensor, never pinned: the learner thinks non_blocking is enough
# fails: no-syncs
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    if isinstance(data, torch.Tensor):
        host = data.clone()
    elif isinstance(data, np.ndarray):
        host = torch.from_numpy(data.copy())
    else:
        host = torch.tensor(data, dtype=dtype)
    return host.to(device, dtype=dtype, non_blocking=True)

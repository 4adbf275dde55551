# Right upload, then a "to be safe" wait for it when a GPU is there: on a GPU a device-wide sync every call.
# fails: no-syncs
def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pinned = is_pin_memory_available()
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        host = data.pin_memory() if pinned and not data.is_pinned() else data
    else:
        host = torch.tensor(data, dtype=dtype, pin_memory=pinned)
    out = host.to(device, dtype=dtype, non_blocking=True)
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # make sure the copy has landed before anyone reads it
    return out

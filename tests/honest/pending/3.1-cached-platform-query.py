# functools.cache on the platform query, as vLLM caches is_pin_memory_available() itself (@cache in vllm.utils)
import functools


@functools.cache
def _pin() -> bool:
    return is_pin_memory_available()


def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    if isinstance(data, (torch.Tensor, np.ndarray)):
        host = torch.as_tensor(data)
        return (host.pin_memory() if _pin() else host).to(device, dtype=dtype, non_blocking=True)
    return torch.tensor(data, dtype=dtype, pin_memory=_pin()).to(device, non_blocking=True)

# functools.lru_cache on a helper (numpy -> torch dtype), a module-level logger, torch.empty(pin_memory=...) + copy_.
import functools
import logging

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=None)
def _torch_dtype_for(np_dtype: np.dtype) -> torch.dtype:
    """The torch dtype torch.from_numpy would give an array of this numpy dtype."""
    return torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype


def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    pinned = is_pin_memory_available()  # asked on every call: the platform decides, never a hard-coded True
    if isinstance(data, torch.Tensor):
        if pinned and not (data.is_pinned() and data.is_contiguous()):
            staged = torch.empty(data.shape, dtype=data.dtype, pin_memory=True)  # contiguous, whatever data's strides
            staged.copy_(data)  # host to host: the caller may reuse `data` at once
        else:
            staged = data  # pinned and contiguous already (or no pinned memory at all): it may go as it is
    elif isinstance(data, np.ndarray):
        staged = torch.empty(data.shape, dtype=dtype or _torch_dtype_for(data.dtype), pin_memory=pinned)
        staged.copy_(torch.from_numpy(data))
    else:
        staged = torch.tensor(data, dtype=dtype, pin_memory=pinned)
    logger.debug("uploading %s of %s (pinned=%s)", tuple(staged.shape), staged.dtype, pinned)
    return staged.to(device, dtype=dtype, non_blocking=True)

# a dispatch table of top-level lambdas keyed by type, an alias computed by a call, type(...) lookups, assert
# review: host.device.type
import collections

_as_host = collections.OrderedDict([
    (torch.Tensor, lambda t, dt: t),
    (np.ndarray, lambda a, dt: torch.from_numpy(a)),
])
_from_python = lambda data, dt: torch.tensor(data, dtype=dt)  # noqa: E731 - lists, nested lists, []
_pinned_clone = torch.Tensor.pin_memory  # the unbound method, called on the host tensor below


def _to_host(data, dtype):
    for kind, convert in _as_host.items():
        if isinstance(data, kind):
            return convert(data, dtype)
    return _from_python(data, dtype)


def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    host = _to_host(data, dtype)
    assert host.device.type == "cpu", f"expected host data, got a tensor on {host.device}"
    if is_pin_memory_available():
        # contiguous first: torch uploads a strided tensor through a pageable temporary of its own
        host = _pinned_clone(host.contiguous())  # copies pageable memory; a pinned tensor comes back as it is
    return host.to(device=device, dtype=dtype, non_blocking=True)

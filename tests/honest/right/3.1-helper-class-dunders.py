# a small helper class with __init__/__repr__/__call__, getattr with a plain name, sorted(key=...) in a debug print
class _Stager:
    """Puts host data into memory a non_blocking upload can read without the host waiting."""

    def __init__(self) -> None:
        self.uploads = 0

    def __repr__(self) -> str:
        return f"_Stager(uploads={self.uploads})"

    def __call__(self, data, dtype):
        pin = is_pin_memory_available()
        if isinstance(data, torch.Tensor):
            source = data
        elif isinstance(data, np.ndarray):
            source = torch.from_numpy(data)
        else:
            return torch.tensor(data, dtype=dtype, pin_memory=pin)  # a new tensor already
        if not pin or (getattr(source, "is_pinned")() and source.is_contiguous()):
            return source
        if dtype is not None and source.dtype != dtype:
            return source.to(dtype).contiguous().pin_memory()  # converted on the host, then one pinned copy
        return source.contiguous().pin_memory()  # a strided pinned tensor would upload through a pageable temporary


_stage = _Stager()


def async_tensor_h2d(data: HostData, device: DeviceLike, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Upload ``data`` (a list, a NumPy array or a CPU tensor) without making the host wait."""
    host = _stage(data, dtype)
    _stage.uploads += 1
    if _stage.uploads == 1:
        print("first upload:", sorted({"shape": tuple(host.shape), "dtype": host.dtype}.items(), key=lambda kv: kv[0]))
    return host.to(device, dtype=dtype, non_blocking=True)
